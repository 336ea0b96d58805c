"""Help that reads (clean metavars, `-- PATH` in the usage, examples), `--color` anywhere,
`rewind hook --help`, `to 0`, and a first run that flows: the demo (headers, one plan,
nothing left behind, a hint that works) and `status` before the first checkpoint. The real
console script, in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess

from helpers import REWIND, run_rewind, write

COMMANDS = ["list", "show", "diff", "to", "undo", "save", "verify", "status", "gc", "forget", "watch",
            "export", "doctor", "pick", "hook", "demo", "hooks install", "hooks uninstall", "hooks status"]


def help_of(command: str) -> str:
    r = run_rewind(*command.split(), "--help", env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert r.returncode == 0, (command, r.stderr)
    return r.stdout


def test_every_help_shows_names_not_types_and_has_examples():
    for command in ["", *COMMANDS]:
        text = help_of(command) if command else run_rewind("--help", env={"COLUMNS": "100"}).stdout
        for raw in ("<str>", "<IdSpec>", "<int", "<float", "{", "[[", "x>=", "x>"):
            assert raw not in text, (command, raw, text)
        if command:
            assert "Examples:" in text, (command, text)


def test_the_command_list_gives_each_summary_whole_at_80_columns():
    """`rewind --help` cut summaries with "..." (click's 45 characters or the width): each is
    its command's first sentence, wrapped."""
    for command in ("", "hooks"):
        out = run_rewind(*command.split(), "--help", env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
        listing = out.split("Commands:\n")[1]
        assert "..." not in listing.replace("PATH...", "") and all(len(line) <= 80 for line in listing.splitlines())
        joined = " ".join(listing.split())
        for phrase in ("with source and flags.", "or between ID and ID2.", "purge those paths' content from all history instead.",
                       "(idempotent; a backup is kept)."):
            if phrase.startswith("(idem") == (command == "hooks"):
                assert phrase in joined, (phrase, listing)


def test_the_usage_of_to_and_diff_names_their_paths():
    assert re.search(r"Usage: rewind to \[OPTIONS\] ID \[PATH\]\.\.\.", help_of("to"))
    assert re.search(r"Usage: rewind diff \[OPTIONS\] ID \[ID2\] \[-- PATH\.\.\.\]", help_of("diff"))
    assert "--project DIR" in help_of("to") and "-n N" in help_of("list")


def test_to_takes_paths_after_the_id_and_diff_says_where_paths_go(tmp_path):
    p = tmp_path / "p"
    write(p, "a.txt", "a\n")
    write(p, "b.txt", "b\n")
    run_rewind("save", cwd=p, check=0)
    write(p, "a.txt", "A\n")
    write(p, "b.txt", "B\n")
    r = run_rewind("to", "1", "a.txt", "--yes", cwd=p)
    assert r.returncode == 0, r
    assert (p / "a.txt").read_text() == "a\n" and (p / "b.txt").read_text() == "B\n"
    r = run_rewind("to", "1", "b.txt", "--dry-run", "--", "a.txt", cwd=p)       # both spellings at once
    assert r.returncode == 0 and "b.txt" in r.stdout, r
    r = run_rewind("to", "1", "nope.txt", "--dry-run", cwd=p)
    assert r.returncode == 1 and "nope.txt" in r.stderr
    r = run_rewind("diff", "1", "a.txt", cwd=p)
    assert r.returncode == 2 and "paths go after `--`" in r.stderr and "rewind diff ID -- a.txt" in r.stderr
    assert "Traceback" not in r.stderr


def test_color_is_taken_after_the_command_too(tmp_path):
    write(tmp_path / "p", "a.txt", "a\n")
    run_rewind("save", cwd=tmp_path / "p", check=0)
    r = run_rewind("list", "--color", "always", cwd=tmp_path / "p", env={"NO_COLOR": ""})
    assert r.returncode == 0 and "\x1b[" in r.stdout, r
    r = run_rewind("list", "--color=never", cwd=tmp_path / "p")
    assert r.returncode == 0 and "\x1b[" not in r.stdout
    r = run_rewind("list", "--color", "sometimes", cwd=tmp_path / "p")
    assert r.returncode == 2 and "auto, always or never" in r.stderr


def test_hook_help_is_printed_and_a_hook_still_prints_nothing(tmp_path):
    r = run_rewind("hook", "--help")
    assert r.returncode == 0 and "Usage: rewind hook" in r.stdout
    r = run_rewind("hook", "claude", input="not json")
    assert r.returncode == 0 and r.stdout == ""


def test_checkpoint_zero_is_not_said_to_be_dropped(tmp_path):
    write(tmp_path / "p", "a.txt", "a\n")
    run_rewind("save", cwd=tmp_path / "p", check=0)
    r = run_rewind("to", "0", "--dry-run", cwd=tmp_path / "p")
    assert r.returncode == 1 and "numbered from 1" in r.stderr and "dropped" not in r.stderr


def test_the_demo_has_headers_shows_the_plan_once_and_leaves_nothing(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("REWIND_WATCH", None)
    proc = subprocess.run([*REWIND, "demo"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    headers = [line for line in proc.stdout.splitlines() if line.startswith("== ")]
    assert len(headers) >= 6 and headers[1].startswith("== 1. ")
    assert proc.stdout.count("Rewind ") == 1                       # the plan of `to 1`, once
    assert "--dry-run" not in proc.stdout
    assert not [p for p in os.listdir(tmp_path) if p.startswith("rewind-demo-")]
    hint = next(line for line in proc.stdout.splitlines() if line.startswith("In your own project:"))
    runner = hint.split("&& ")[1].split(" hooks install")[0]
    assert runner == "rewind" or os.path.exists(runner.split()[0]), hint


def test_the_kept_demo_can_be_explored_with_the_command_it_prints(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("REWIND_WATCH", None)
    proc = subprocess.run([*REWIND, "demo", "--keep"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("Explore it yourself:"))
    command = line.split(":", 1)[1].strip()
    r = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in env.items() if k != "REWIND_HOME"})
    assert r.returncode == 0 and "prompt" in r.stdout, (command, r.stdout, r.stderr)


def test_status_before_the_first_checkpoint_says_whether_prompts_will_take_one(tmp_path):
    root = tmp_path / "p"
    write(root, "a.txt", "a\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    r = run_rewind("status", cwd=root)
    assert r.returncode == 0 and "rewind hooks install claude" in r.stdout, r
    run_rewind("hooks", "install", "claude", cwd=root, check=0)
    r = run_rewind("status", cwd=root)
    assert r.returncode == 0 and "the next prompt takes one" in r.stdout and "claude (local)" in r.stdout, r
    r = run_rewind("status", "--json", cwd=root)
    assert r.returncode == 0 and '"checkpoints": 0' in r.stdout and '"claude (local)"' in r.stdout


def test_status_says_what_quick_and_full_scans_are(tmp_path):
    write(tmp_path / "p", "a.txt", "a\n")
    run_rewind("save", cwd=tmp_path / "p", check=0)
    r = run_rewind("status", cwd=tmp_path / "p")
    assert r.returncode == 0 and "quick: only the directories the watcher saw change" in r.stdout


def test_a_command_built_alone_is_the_command_built_with_all_the_others():
    """A run of one command builds its module alone (cli/app.py MODULES): every command is
    in the map, each module registers exactly the names mapped to it, and the one built
    alone has the help and parameters of the one in the whole tree."""
    from rewind.cli.app import MODULES, build
    whole = build(None)
    assert set(whole.commands) == set(MODULES), set(whole.commands) ^ set(MODULES)
    for word in MODULES:
        alone = build([word, "--help"] if word != "hook" else [word])
        assert set(alone.commands) == {w for w, m in MODULES.items() if m == MODULES[word]}, word
        a, w = alone.commands[word], whole.commands[word]
        assert (a.help, a.epilog, [p.name for p in a.params], getattr(a, "commands", {}).keys()) == \
            (w.help, w.epilog, [p.name for p in w.params], getattr(w, "commands", {}).keys()), word
    for line in (["--color", "never", "list"], ["--color=never", "show", "1"]):
        assert set(build(line).commands) == {line[-1] if line[-1] != "1" else "show"}
    for line in (["--help"], [], ["lst"], ["--version"]):
        assert set(build(line).commands) == set(MODULES), line
