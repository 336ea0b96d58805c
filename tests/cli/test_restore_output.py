"""What `rewind to` and `rewind undo` say: one count of what changes, in the plan, the question and the
result; undo names who wrote what it puts back; dry runs close with what would do it;
declining is a notice, not an error; plans as JSON; what a restore will not undo; a
`-- PATH` that names nothing is an error.

Every test runs the installed `rewind` on a real project, with sessions replayed through
real `rewind hook claude` processes from the payloads Claude Code sent (rewind/data), the
tools' effects carried out for real (a file outside the project written, a branch made, a
push to a local remote).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import REWIND, fingerprint, git, run_rewind, write
from rewind.cli.replay import bundled_session, fill, replay
from rewind.history.effects import classify

# -- scenarios -------------------------------------------------------------------------------------


def _deliver(root: Path):
    env = dict(os.environ, CLAUDE_PROJECT_DIR=str(root))

    def deliver(payload):
        r = subprocess.run([*REWIND, "hook", "claude"], input=json.dumps(payload), env=env, cwd=root,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout == "", (payload["hook_event_name"], r.stdout, r.stderr)
    return deliver


def _bundled(root: Path, tmp_path: Path) -> Path:
    """The bundled session (5 prompts: Write, Edit, Bash, a symlink, a failing command) replayed
    on a small project, checkpoints 1-5."""
    for name, text in {"README.md": "# demo\n", "config.ini": "[core]\nlevel = 1\n", "old.log": "log\n",
                       "a.txt": "alpha\n"}.items():
        write(root, name, text)
    session = [fill(p, str(root), "s-out", str(tmp_path / "cfg")) for p in bundled_session()]
    replay(session, _deliver(root))
    return root


def _session(root: Path, tmp_path: Path, prompts: list[list[tuple]]) -> None:
    """A session of our own, from the captured payloads' shapes: each prompt a list of
    ("write", path, content) or ("bash", command) tool calls."""
    b = [fill(p, str(root), "s-mine", str(tmp_path / "cfg")) for p in bundled_session()]
    start, submit, write_pre, write_post, bash_pre, bash_post, stop, end = (b[i] for i in (0, 1, 2, 3, 6, 7, 8, 9))
    payloads = [copy.deepcopy(start)]
    n = 0
    for i, calls in enumerate(prompts):
        p = copy.deepcopy(submit)
        p["prompt"], p["prompt_id"] = f"prompt {i + 1}", f"00000000-0000-4000-8000-0000000001{i:02d}"
        payloads.append(p)
        for call in calls:
            n += 1
            pair = (write_pre, write_post) if call[0] == "write" else (bash_pre, bash_post)
            args = {"file_path": call[1], "content": call[2]} if call[0] == "write" else {"command": call[1]}
            for template in pair:
                q = copy.deepcopy(template)
                q["tool_input"], q["tool_use_id"] = args, f"toolu_mine_{n}"
                payloads.append(q)
        payloads.append(copy.deepcopy(stop))
    payloads.append(copy.deepcopy(end))
    replay(payloads, _deliver(root))


def _effects_project(tmp_path: Path) -> tuple[Path, Path]:
    """A git project with a local remote; prompt 1 writes in the project and outside it,
    makes a branch, pushes it and calls curl; prompt 2 edits. Checkpoints 1 and 2."""
    root, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    write(root, "src/a.py", "a = 1\n")
    elsewhere.mkdir()
    git("init", "-q", "--bare", str(tmp_path / "remote.git"), cwd=tmp_path)
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    git("remote", "add", "origin", str(tmp_path / "remote.git"), cwd=root)
    _session(root, tmp_path, [
        [("write", str(root / "src/a.py"), "a = 2\n"),
         ("write", str(elsewhere / "notes.txt"), "outside\n"),
         ("bash", "git checkout -q -b feature"),
         ("bash", "git push -q origin feature"),
         ("bash", "curl -s http://127.0.0.1:9/ || true"),
         ("bash", "ls -la")],
        [("bash", "echo b = 1 > src/b.py")],
    ])
    return root, elsewhere


def _ids(root) -> list[int]:
    return [c["id"] for c in json.loads(run_rewind("list", "--json", cwd=root, check=0).stdout)]


HEADER = r"(\d+) paths? changes?(?: \(\d+ of them (?:a directory|directories)\))?:"


def _plan_lines(out: str) -> list[str]:
    """The plan's lines: between "N paths change:" and the next line that is not indented."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(HEADER + "$", line))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("  ") or line.startswith("  skip ") or line.startswith("  keep "):
            break
        body.append(line)
    return body


def _count(out: str) -> int:
    return int(re.search("^" + HEADER + "$", out, re.M).group(1))


# -- 1. one count ----------------------------------------------------------------------------------

def test_the_plan_its_json_and_the_result_say_the_same_count(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    dry = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    n = _count(dry)
    assert n == len(_plan_lines(dry)) and n > 3, dry     # one line per path: the header counts them
    plan = json.loads(run_rewind("to", "1", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert plan["count"] == n == len(plan["paths"])
    assert len({p["path"] for p in plan["paths"]}) == n
    done = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert f"Rewound to checkpoint 1: {n} paths changed." in done, done
    assert "operation" not in done
    assert _count(done) == n                              # the plan shown before it acts, too


# -- 2. undo: who wrote what it puts back ----------------------------------------------------------

def test_undo_names_who_wrote_the_content_it_puts_back(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    before = fingerprint(root)
    out = run_rewind("undo", "--dry-run", cwd=root, check=0).stdout
    assert fingerprint(root) == before                    # a dry run changes nothing
    lines = {line.split()[0]: line for line in out.splitlines() if "written by:" in line or "removed" in line}
    assert "written by: tool (Edit)" in lines["config.ini"], out
    assert "written by: tool (Write)" in lines["notes.md"], out
    assert "written by: bash (rm old.log && ln -s src/app.py" in lines["app_link.py"], out
    assert not any("written by: rewind" in line for line in lines.values()), out
    assert "<- " not in out                               # nobody changed anything since the rewind
    assert "src" not in lines                             # a directory made again has no author line
    columns = {line.index("written by:") for line in lines.values() if "written by:" in line}
    assert len(columns) == 1, out                         # the authors line up, whatever the path's length
    n = _count(out)
    assert out.splitlines()[-1] == "Dry run: nothing changed; `rewind undo` does it."
    done = run_rewind("undo", "--yes", cwd=root, check=0).stdout
    assert f"Undid the rewind to checkpoint 1: {n} paths changed." in done, done
    assert (root / "config.ini").read_text() == "[core]\nlevel = 2\n"


def test_undo_marks_what_changed_since_the_rewind_and_says_so_in_json(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    write(root, "config.ini", "edited after the rewind\n")
    out = run_rewind("undo", "--dry-run", cwd=root, check=0).stdout
    marked = [line for line in out.splitlines() if "<- changed since the rewind" in line]
    assert [line.split()[0] for line in marked] == ["config.ini"], out
    plan = json.loads(run_rewind("undo", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert plan["action"] == "undo" and plan["undoes"]["rewind_to"] == 1
    by_path = {p["path"]: p for p in plan["paths"]}
    assert by_path["config.ini"]["notice"] == "changed since the rewind"
    assert by_path["config.ini"]["restored_author"]["source"] == "tool"
    assert by_path["config.ini"]["restored_author"]["tool"] == "Edit"
    assert by_path["README.md"]["notice"] is None if "README.md" in by_path else True


# -- 3. the dry run's closing line -----------------------------------------------------------------

def test_a_dry_run_closes_with_the_command_that_does_it(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    before = fingerprint(root)
    out = run_rewind("to", "2", "--dry-run", cwd=root, check=0).stdout
    assert out.splitlines()[-1] == "Dry run: nothing changed; `rewind to 2` does it.", out
    out = run_rewind("to", "2", "--dry-run", "--", "src/app.py", cwd=root, check=0).stdout
    assert out.splitlines()[-1] == "Dry run: nothing changed; `rewind to 2 -- src/app.py` does it.", out
    assert _count(out) == 1
    assert fingerprint(root) == before and _ids(root) == [5, 4, 3, 2, 1]


# -- 4. declining ----------------------------------------------------------------------------------

def test_declining_prints_a_notice_not_an_error_and_exits_1(tmp_path):
    from test_exit_codes import _rest   # the pty reader the exit-code tests use
    import pty
    import select
    import time
    root = _bundled(tmp_path / "proj", tmp_path)
    n = _count(run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout)
    before = fingerprint(root)
    master, slave = pty.openpty()
    proc = subprocess.Popen([*REWIND, "to", "1"], cwd=root, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    screen = bytearray()
    deadline = time.monotonic() + 120
    try:
        while b"[y/N]" not in screen:
            assert proc.poll() is None and time.monotonic() < deadline, screen.decode(errors="replace")
            if select.select([master], [], [], 0.1)[0]:
                screen.extend(os.read(master, 65536))
        os.write(master, b"n\r")
        text = _rest(proc, master, screen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, text
    assert f"Rewind {n} paths to checkpoint 1" in text and f"{n} paths change (3 of them directories):" in text, text
    after = [line.strip() for line in text.split("[y/N]")[-1].splitlines() if line.strip()]
    assert len(after) == 2 and after[-1] == "Declined: nothing changed.", text
    assert "error" not in text.split("[y/N]")[-1]
    assert fingerprint(root) == before and _ids(root) == [5, 4, 3, 2, 1]


# -- 5. plans as JSON ------------------------------------------------------------------------------

def test_dry_run_json_is_the_plan_and_json_needs_dry_run(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    before = fingerprint(root)
    plan = json.loads(run_rewind("to", "2", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert plan["dry_run"] is True and plan["action"] == "to" and plan["target"]["id"] == 2
    assert plan["target"]["prompt"].startswith("Bump the level")
    by_path = {p["path"]: p for p in plan["paths"]}
    assert by_path["config.ini"]["action"] == "write" and by_path["config.ini"]["overwrites"] is True
    assert by_path["config.ini"]["current_author"] == {"source": "tool", "tool": "Edit", "command": None,
                                                       "session_id": "s-out", "checkpoint": 2}
    assert by_path["docs"]["action"] == "rmdir"
    assert plan["will_not_undo"] == []
    assert fingerprint(root) == before
    r = run_rewind("to", "2", "--json", cwd=root)
    assert r.returncode == 2 and "--dry-run" in r.stderr
    assert run_rewind("undo", "--json", cwd=root).returncode == 2
    nothing = json.loads(run_rewind("undo", "--dry-run", "--json", cwd=root, check=0).stdout)
    assert nothing["count"] == 0 and nothing["undoes"] is None


# -- 6. what it will not undo ----------------------------------------------------------------------

def test_the_plan_lists_what_the_restore_will_not_undo_with_its_checkpoint(tmp_path):
    root, elsewhere = _effects_project(tmp_path)
    assert _ids(root) == [2, 1]
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=root).strip() == "feature"
    out = run_rewind("to", "1", "--dry-run", cwd=root, check=0).stdout
    section = out.split("It will not undo (outside the tree):\n")[1].splitlines()
    assert f"  checkpoint 1: a write outside the project (Write): {elsewhere / 'notes.txt'}" in section, out
    # the branch switch is git state, said once, on the prompt whose command made it
    moves = [line for line in section if "-> feature" in line]
    assert len(moves) == 1 and re.fullmatch(r"  checkpoint 1: git branch \w+ -> feature \(HEAD [0-9a-f]{8}\), "
                                            r"by `git checkout -q -b feature`: HEAD and branches stay where "
                                            r"they are", moves[0]), out
    assert not any("git checkout" in line for line in section if line not in moves), out
    assert "  checkpoint 1: git push (git: history, refs and remotes stay): git push -q origin feature" in section
    assert ("  checkpoint 1: curl (network: what it sent stays sent): curl -s http://127.0.0.1:9/ || true"
            in section), out
    assert not any("ls -la" in line or "echo b = 1" in line for line in section), out
    assert "rewind cannot see" in out
    plan = json.loads(run_rewind("to", "1", "--dry-run", "--json", cwd=root, check=0).stdout)
    kinds = [(e["kind"], e["category"], e["checkpoint"]) for e in plan["will_not_undo"]]
    assert ("outside", None, 1) in kinds and ("git", None, 1) in kinds
    assert ("command", "git", 1) in kinds and ("command", "network", 1) in kinds
    # to 2: only what ran after checkpoint 2 counts, and that is a plain edit
    assert "It will not undo" not in run_rewind("to", "2", "--dry-run", cwd=root, check=0).stdout
    # the restore leaves them as they are: the file outside, the branch
    run_rewind("to", "1", "--yes", cwd=root, check=0)
    assert (elsewhere / "notes.txt").read_text() == "outside\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=root).strip() == "feature"
    assert (root / "src/a.py").read_text() == "a = 1\n"


@pytest.mark.parametrize("command, expected", [
    ("git push origin main", [("git", "git push")]),
    ("git -C sub commit -qm x", []),                # a commit's effect is the git move it made
    ("git checkout -b feature", []),
    ("git branch --show-current > branch.txt", []),  # read-only git: no effect
    ("git branch", []),
    ("git branch -a -v", []),
    ("git branch --list 'fe*'", []),
    ("git branch feature", [("git", "git branch")]),
    ("git branch -D feature", [("git", "git branch")]),
    ("git tag -l", []),
    ("git tag v1", [("git", "git tag")]),
    ("git stash list", []),
    ("git stash", [("git", "git stash")]),
    ("git remote -v", []),
    ("git remote add origin ../r.git", [("git", "git remote")]),
    ("git status && git diff", []),
    ("curl -X POST https://example.com/hook", [("network", "curl")]),
    ("cat key | ssh host 'cat >> x'", [("network", "ssh")]),
    ("rsync -a dist/ deploy@host:/srv", [("network", "rsync")]),
    ("rsync -a src/ backup/", []),
    ("npm run build && npm publish", [("publish", "npm publish")]),
    ("python -m twine upload dist/*", []),          # `python -m twine` is not in the list: documented
    ("twine upload dist/*", [("publish", "twine upload")]),
    ("sudo apt-get install -y jq", [("install", "apt-get install")]),
    ("python3 -m pip install requests", [("install", "pip install")]),
    ("npm install", []),
    ("npm install -g typescript", [("install", "npm install -g")]),
    ("FOO=1 docker compose up -d", [("container", "docker compose")]),
    ("docker ps", []),
    ("kubectl apply -f k8s/", [("container", "kubectl apply")]),
    ("psql -c 'drop table x'", [("database", "psql")]),
    ("sqlite3 app.db .tables", []),
    ("sqlite3 /var/lib/app.db 'delete from t'", [("database", "sqlite3")]),
    ("python manage.py migrate", [("database", "manage.py migrate")]),
    ("npx prisma migrate dev", [("database", "prisma migrate")]),
    ("bundle exec rake db:migrate", [("database", "rake db:")]),
    ("alembic upgrade head", [("database", "alembic")]),
    ("terraform plan", []),
    ("terraform apply -auto-approve", [("cloud", "terraform apply")]),
    ("bash -c 'git tag v1 && git push --tags'", [("git", "git tag"), ("git", "git push")]),
    ("echo $(curl -s ifconfig.me)", [("network", "curl")]),
    ("pytest -q; grep -r curl .", []),
    ("make deploy", []),                            # what a script does: not known (documented)
    ('echo "unclosed', []),
])
def test_the_command_classifier(command, expected):
    assert classify(command, "/proj") == expected


# -- 7. a path that names nothing ------------------------------------------------------------------

def test_a_path_that_names_nothing_in_either_tree_is_an_error(tmp_path):
    root = _bundled(tmp_path / "proj", tmp_path)
    before = fingerprint(root)
    for args in (["--dry-run"], ["--yes"], ["--dry-run", "--json"]):
        r = run_rewind("to", "2", *args, "--", "src/app.y", cwd=root)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stderr.strip().splitlines() == ["error: no such path in checkpoint 2 or in the tree: src/app.y"]
        assert "already matches" not in r.stdout
    assert fingerprint(root) == before and _ids(root) == [5, 4, 3, 2, 1]
    # a path only the checkpoint has (deleted since), or only the tree has (made since), is fine
    assert _count(run_rewind("to", "2", "--dry-run", "--", "old.log", cwd=root, check=0).stdout) == 1
    out = run_rewind("to", "2", "--dry-run", "--", "where.txt", cwd=root, check=0).stdout
    assert _count(out) == 1 and "delete  where.txt" in out
    # and one that matches in both trees and has not changed: the tree already matches
    out = run_rewind("to", "2", "--dry-run", "--", "README.md", cwd=root, check=0).stdout
    assert "already matches" in out


def test_the_plan_counts_its_directories_and_says_what_the_paths_it_does_not_overwrite_lose(tmp_path):
    """A plan of 5 paths of which 2 are directories and 1 a file put back: the header names the
    directories (the list counts the checkpoint's files and links), and the paths not in the
    overwritten list are said in a line; the rewind's fold names its badge in words."""
    root = tmp_path / "proj"
    write(root, "gone.txt", "back\n")
    write(root, "keep.txt", "1\n")
    run_rewind("save", "-m", "one", cwd=root, check=0)
    (root / "gone.txt").unlink()
    write(root, "a/b/new.txt", "new\n")
    os.symlink("keep.txt", root / "link")
    run_rewind("save", "-m", "two", cwd=root, check=0)
    out = run_rewind("to", "1", "--yes", cwd=root, check=0).stdout
    assert "5 paths change (2 of them directories):" in out, out
    assert _count(out) == 5 and len(_plan_lines(out)) == 5
    assert "It overwrites or removes 2 of them" in out
    assert ("The other 3 lose nothing: 1 path put back that is gone now (gone.txt); "
            "2 emptied directories removed (a/b, a).") in out or \
           ("The other 3 lose nothing: 2 emptied directories removed (a/b, a); "
            "1 path put back that is gone now (gone.txt).") in out, out
    listed = run_rewind("list", cwd=root, env={"NO_COLOR": "1", "COLUMNS": "120"}, check=0).stdout
    assert "↳ rewind here: 3 (newest" in listed and "changing a symlink)" in listed, listed
    assert "[symlink])" not in listed


def test_content_from_before_the_history_says_so_in_words():
    from rewind.cli.list_view import restored_text
    assert restored_text({"checkpoint": 3}) == \
        "put back from checkpoint 3 (who wrote it is not known: before rewind recorded it)"


def test_on_a_terminal_the_lines_of_to_and_undo_fit_its_width(tmp_path):
    """A terminal breaks a long line anywhere; rewind wraps its sentences at spaces to the
    width (piped, each stays one line for what reads it)."""
    from helpers import on_a_terminal
    from rewind.cli.render import cells
    root = _bundled(tmp_path / "p", tmp_path)
    write(root, "README.md", "# demo\nmine\n")
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    for args in (["to", "1", "--yes"], ["undo", "--yes"]):
        code, screen = on_a_terminal(args, root, env)
        assert code == 0, screen
        lines = [ANSI_ESC.sub("", line) for line in screen.replace("\r", "").splitlines()]
        assert all(cells(line) <= 100 for line in lines), [line for line in lines if cells(line) > 100]
        joined = " ".join(" ".join(lines).split())
        assert ("Rewound to checkpoint 1: " if args[0] == "to" else "Undid the rewind to checkpoint 1: ") in joined
        assert "`rewind undo` puts it back." in joined or args[0] == "undo"
    piped = run_rewind("to", "1", "--dry-run", cwd=root, env={"COLUMNS": "60"}, check=0).stdout
    assert any(len(line) > 60 for line in piped.splitlines())                 # piped: lines whole


ANSI_ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
