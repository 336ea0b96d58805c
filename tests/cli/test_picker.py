"""The picker, driven by Textual's pilot on a project recorded through the real hooks (Claude
Code 2.1.197's captured payloads), asserting on what the screen shows."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest

from helpers import fingerprint, project, write
from rewind.cli.replay import bundled_session, fill, hook_in_process, replay

LONG = "Exercise the edge cases: " + "every one of them, " * 4      # 101 characters, spaces included
LONG = LONG[:100]
CHOICES = ("c  Restore code", "v  Restore conversation", "b  Restore code and conversation", "n  Cancel (Esc)")


def screen_text(app) -> str:
    """The screen as a person reads it (what export_screenshot draws, as plain text)."""
    from rich.console import Console
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def flat(screen: str) -> str:
    """The screen's words on one line, without the dialog's side borders and the diff pane's
    left edge (both wrap their lines)."""
    return " ".join(screen.replace("█", " ").replace("▏", " ").split())


class Recorded:
    """A project recorded through the hooks: its root, the tree as each prompt found it, and
    (with a transcript) the session's Claude Code transcript."""

    def __init__(self, tmp_path, transcript: bool = False):
        self.root = tmp_path / "proj"
        for name, text in {"README.md": "# demo project\n", "config.ini": "[core]\nname = demo\nlevel = 1\n",
                           "old.log": "stale log line\n", "a.txt": "alpha\n"}.items():
            write(self.root, name, text)
        session = [fill(p, str(self.root), "s-picker", str(tmp_path / "cfg")) for p in bundled_session()]
        if transcript:
            # the first conversation (three prompts, resumed twice): its prompt ids are its own
            second_start = [i for i, p in enumerate(session) if p.get("source") == "startup"][1]
            session = session[:second_start]
        for p in session:
            if p["hook_event_name"] == "UserPromptSubmit" and p["prompt"].startswith("Create the app"):
                p["prompt"] = "Make [red]x[/red] bold [b] please"
            if p["hook_event_name"] == "UserPromptSubmit" and p["prompt"].startswith("Exercise"):
                p["prompt"] = LONG
        self.tree_at: dict[str, dict] = {}
        replay(session, hook_in_process(str(self.root)),
               between=lambda p: self.tree_at.setdefault(p["prompt"], fingerprint(self.root)))
        self.transcript = Path(session[1]["transcript_path"])
        if transcript:
            self.write_transcript(session)

    def write_transcript(self, session) -> None:
        """Claude Code's transcript of the session as the hook payloads name it: each prompt a
        `user` entry carrying the payload's promptId, each answered (the lines conversation.py reads)."""
        entries = []
        for p in session:
            if p["hook_event_name"] == "UserPromptSubmit":
                entries.append({"type": "user", "sessionId": p["session_id"], "promptId": p["prompt_id"],
                                "cwd": p["cwd"], "message": {"role": "user", "content": p["prompt"]}})
                entries.append({"type": "assistant", "sessionId": p["session_id"],
                                "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}})
        self.transcript.parent.mkdir(parents=True)
        self.transcript.write_text("".join(json.dumps(e) + "\n" for e in entries))


def drive(rec: Recorded, size, script) -> tuple[object, dict]:
    """Run the picker at `size` through `script(pilot, app, seen)`; returns the app (its
    return_value is the picker's result line) and what the script saw."""
    from rewind.cli.picker import run_picker
    proj = project(rec.root)
    app = run_picker(proj)
    seen: dict = {}

    async def run():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(pilot, app, seen)
    try:
        asyncio.run(run())
    finally:
        proj.close()
    return app, seen


async def select(pilot, app, prompt_start: str) -> None:
    """Move the cursor down to the checkpoint whose prompt starts so."""
    while not (app.current.message or "").startswith(prompt_start):
        await pilot.press("down")
        await pilot.pause()


def test_prompts_badges_and_authors_show_literally_at_80x24(tmp_path):
    rec = Recorded(tmp_path)

    async def script(pilot, app, seen):
        seen["first"] = screen_text(app)
        await select(pilot, app, "Make [red]")                  # the first prompt: a bash marker
        seen["screen"] = screen_text(app)
        seen["by"] = [str(app.query_one("#changes").get_row_at(i)[1]) for i in range(len(app.rows))]
    app, seen = drive(rec, (80, 24), script)
    screen = seen["screen"]
    assert "Make [red]x[/red] bold [b] please" in screen       # user text never parsed as markup
    assert " symlink " in screen             # the badges render (bash and external: the counts say them)
    # the prompt takes what the other columns leave: 40-odd characters at 80 columns
    assert "Move the marker into docs/ and write a d" in seen["first"]
    assert LONG[:40] in seen["first"] and LONG not in seen["first"]
    assert any(b.startswith("bash: ") and "Bash" not in b for b in seen["by"]), seen["by"]
    assert any(b == "tool: Write" for b in seen["by"]), seen["by"]
    assert not any(b.startswith("bash: Bash") or b.startswith("tool: Write:") for b in seen["by"])


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
def test_a_long_path_leaves_the_author_readable_and_the_diff_names_it_whole(tmp_path, size):
    """The newcomer's trial: a long path filled the half-width changes table and squeezed its
    author column to one letter. Who comes first, cut to its width with the flags kept; the
    diff pane names the author whole."""
    rec = Recorded(tmp_path)
    deep = "src/package_with_a_long_name/subpackage_too/module_whose_name_is_long_as_well.py"
    write(rec.root, deep, "x = 1\n")              # after the last checkpoint: the newest's changes

    async def script(pilot, app, seen):
        seen["screen"] = screen_text(app)
        table = app.query_one("#changes")
        seen["cells"] = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
    app, seen = drive(rec, size, script)
    row = next(cells for cells in seen["cells"] if cells[2] == deep)
    assert row[:2] == ["A", "external"], seen["cells"]
    assert re.search(r" A  external +src/package_w", seen["screen"]), seen["screen"]   # who, then the path
    assert "▏ by external" in seen["screen"], seen["screen"]     # the diff pane's head: who, whole
    assert all(len(cells[1]) <= 24 for cells in seen["cells"]), seen["cells"]


def test_an_author_is_cut_to_the_column_with_its_flags_kept():
    from types import SimpleNamespace
    from rewind.cli.picker import by
    row = SimpleNamespace(source="bash", command="sed -i 's/alpha/beta/' a.txt && python tools/gen.py",
                          tool=None, flags=["ambiguous"])
    assert by(row).startswith("bash: sed -i 's/alpha/beta/' a.txt") and by(row).endswith("… ambiguous")
    cut = by(row, 24)
    assert len(cut) <= 24 and cut.endswith("… ambiguous") and cut.startswith("bash: se"), cut
    meanwhile = SimpleNamespace(source="external", command="npm run dev", tool=None, flags=["ambiguous"])
    assert by(meanwhile) == "external, while npm run dev ran ambiguous"     # as `show` names it


def test_a_wide_screen_shows_a_100_character_prompt_whole_and_a_resize_refits_it(tmp_path):
    rec = Recorded(tmp_path)

    async def script(pilot, app, seen):
        seen["wide"] = screen_text(app)
        await pilot.press("down")
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        seen["narrow"] = screen_text(app)
        seen["current"] = app.current.message
    app, seen = drive(rec, (160, 48), script)
    assert len(LONG) == 100 and LONG in seen["wide"]
    assert "Bump the level in config.ini, change the greeting, delete old.log and add a symlink to the app." \
        in seen["wide"]
    assert "Make [red]x[/red] bold [b] please" in seen["wide"] and " bash " in seen["wide"]
    assert LONG not in seen["narrow"] and LONG[:40] in seen["narrow"]
    assert seen["current"] == LONG                              # the refit kept the selection


def test_without_a_transcript_only_the_code_is_offered_and_cancel_changes_nothing(tmp_path):
    rec = Recorded(tmp_path)
    before = fingerprint(rec.root)

    async def script(pilot, app, seen):
        await pilot.press("down", "r")
        await pilot.pause()
        seen["dialog"] = screen_text(app)
        await pilot.press("v", "b")                 # not offered: nothing happens
        await pilot.pause()
        seen["still"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        seen["after"] = screen_text(app)
        await pilot.press("r", "n")
        await pilot.pause()
        await pilot.press("q")
    app, seen = drive(rec, (160, 48), script)
    dialog = flat(seen["dialog"])
    assert "Rewind 4 paths to checkpoint 4? A safety checkpoint is taken first" in dialog
    assert "c  Restore code" in seen["dialog"] and "n  Cancel (Esc)" in seen["dialog"]
    assert "Restore conversation" not in dialog and "Restore code and conversation" not in dialog
    assert "Conversation: not available (cannot read the session's transcript" in dialog
    ages = re.compile(r"\d+s ago")            # (the ages behind the dialog go on ticking)
    assert ages.sub("Ns ago", seen["still"]) == ages.sub("Ns ago", seen["dialog"])
    assert "Restore code" not in seen["after"]
    assert app.return_value is None and fingerprint(rec.root) == before
    assert not rec.transcript.parent.exists()


def test_a_long_plan_keeps_the_question_and_every_choice_on_an_80x24_screen(tmp_path):
    rec = Recorded(tmp_path, transcript=True)
    for i in range(200):
        write(rec.root, f"gen/file{i:03}.txt", f"{i}\n")
    before = fingerprint(rec.root)
    transcript = rec.transcript.read_bytes()

    async def script(pilot, app, seen):
        await pilot.press("r")
        await pilot.pause()
        seen["dialog"] = screen_text(app)
        plan = app.screen.query_one("#plan")
        seen["scroll"] = plan.max_scroll_y
        await pilot.press(*["pagedown"] * 100)       # the operations, then who changed each
        await pilot.pause()
        seen["end"] = screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("q")
    app, seen = drive(rec, (80, 24), script)
    dialog = flat(seen["dialog"])
    assert "Rewind to checkpoint 3: Move the marker" in dialog and "delete gen/file000.txt" in dialog
    assert "delete gen/file199.txt" not in dialog and seen["scroll"] > 150      # the plan scrolls
    assert ("Rewind 205 paths to checkpoint 3, overwriting 200 not written by the agent? A safety checkpoint "
            "is taken first; `rewind undo` goes back.") in dialog
    assert "PgUp/PgDn scroll the plan" in dialog
    assert "Conversation: a new session that ends before this prompt" in dialog
    for choice in CHOICES:
        assert choice in seen["dialog"], choice
    end = flat(seen["end"])
    assert "gen/file199.txt" in end and "delete gen/file000.txt" not in end     # the plan's end
    # who last changed what it overwrites, as `rewind to` says it
    assert "<- not written by the agent" in end and "last changed by: " in end, end
    assert all(choice in seen["end"] for choice in CHOICES)
    assert app.return_value is None and fingerprint(rec.root) == before
    assert rec.transcript.read_bytes() == transcript and len(list(rec.transcript.parent.iterdir())) == 1


@pytest.mark.parametrize("key, choice", [("c", "code"), ("v", "conversation"), ("b", "both"), ("enter", "code")])
def test_each_choice_does_what_it_says(tmp_path, key, choice):
    rec = Recorded(tmp_path, transcript=True)
    prompt = "Bump the level"
    before = fingerprint(rec.root)
    transcript = rec.transcript.read_bytes()

    async def script(pilot, app, seen):
        await select(pilot, app, prompt)
        await pilot.press("r")
        await pilot.pause()
        seen["dialog"] = screen_text(app)
        await pilot.press(key)
        await pilot.pause()
    app, seen = drive(rec, (80, 24), script)
    for c in CHOICES:
        assert c in seen["dialog"], c
    said = app.return_value
    target = next(v for k, v in rec.tree_at.items() if k.startswith(prompt))
    assert rec.transcript.read_bytes() == transcript                # the original, never modified
    forks = [p for p in rec.transcript.parent.iterdir() if p != rec.transcript]
    if choice in ("code", "both"):
        assert said.startswith("Rewound to checkpoint 2: ") and "`rewind undo` goes back" in said
        assert fingerprint(rec.root) == target and target != before
    else:
        assert fingerprint(rec.root) == before
    if choice in ("conversation", "both"):
        new_id = said.split("claude --resume ")[1].split()[0]
        config = rec.transcript.parents[2]                           # not ~/.claude: named
        assert f"cd {rec.root} && CLAUDE_CONFIG_DIR={config} claude --resume {new_id}" in said
        assert forks == [rec.transcript.parent / f"{new_id}.jsonl"]
        entries = [json.loads(line) for line in forks[0].read_text().splitlines()]
        kept = [e["message"]["content"] for e in entries if e["type"] == "user"]
        assert kept == ["Make [red]x[/red] bold [b] please"]           # the conversation before checkpoint 2
        assert {e["sessionId"] for e in entries} == {new_id}
    else:
        assert forks == [] and "claude --resume" not in said


def test_a_transcript_gone_while_the_dialog_was_open_is_an_error_after_the_code_is_restored(tmp_path):
    from rewind.errors import ConversationUnavailable
    rec = Recorded(tmp_path, transcript=True)

    async def script(pilot, app, seen):
        await select(pilot, app, "Bump the level")
        await pilot.press("r")
        await pilot.pause()
        rec.transcript.unlink()                     # Claude Code cleaned it up meanwhile
        await pilot.press("b")
        await pilot.pause()
    app, seen = drive(rec, (80, 24), script)
    assert app.return_value.startswith("Rewound to checkpoint 2: ") and "claude --resume" not in app.return_value
    assert isinstance(app.failure, ConversationUnavailable) and "cannot read" in app.failure.message
    assert fingerprint(rec.root) == next(v for k, v in rec.tree_at.items() if k.startswith("Bump the level"))
    assert list(rec.transcript.parent.iterdir()) == []


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_the_picker_folds_rewinds_as_the_list_does_and_its_keys_do_what_the_footer_says(tmp_path, size):
    """Issue 32, item 13: the safety checkpoint of a rewind folds under the checkpoint whose
    tree it restored (the newest prompt is selected at start, `e` shows every one); Esc is in
    the footer; Enter opens the changes, Home and End go to the ends; the ages count on; the
    restore plan lists what `rewind to --dry-run` lists, with who last changed what it
    overwrites; the changes and the diff panes are apart."""
    from helpers import run_rewind
    rec = Recorded(tmp_path)
    run_rewind("to", "2", "--yes", cwd=rec.root, check=0)          # its safety checkpoint: 6
    write(rec.root, "README.md", "# demo project\nmine\n")
    cli = run_rewind("to", "3", "--dry-run", cwd=rec.root, env={"NO_COLOR": "1"}, check=0).stdout

    async def script(pilot, app, seen):
        seen["start"] = screen_text(app)
        seen["first"] = app.current.number
        seen["rows"] = [cp.number for cp in app.cps]
        age = app.lines[0][4]
        for _ in range(60):                                         # ages are read again
            await pilot.pause(0.1)
            if app.lines[0][4] != age:
                break
        seen["aged"] = (age, app.lines[0][4])
        await pilot.press("e")
        await pilot.pause()
        seen["every"] = [cp.number for cp in app.cps]
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        seen["end"] = app.current.number
        await pilot.press("home")
        await pilot.pause()
        seen["home"] = app.current.number
        await select(pilot, app, "Move the marker")
        await pilot.press("enter")
        await pilot.pause()
        seen["focused"] = app.focused.id
        seen["panes"] = screen_text(app)
        await pilot.press("tab")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        seen["dialog"] = flat(screen_text(app))
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("escape")
    app, seen = drive(rec, size, script)
    assert seen["rows"] == [5, 4, 3, 2, 1] and seen["first"] == 5, seen["rows"]
    assert "↳ rewind here: 6" in seen["start"] and "before rewind to 2" not in seen["start"]
    footer = seen["start"].splitlines()[-1]
    assert "q/Esc" in footer and "Quit" in footer, footer
    assert seen["aged"][0] != seen["aged"][1], seen["aged"]
    assert seen["every"] == [6, 5, 4, 3, 2, 1]
    assert seen["end"] == 1 and seen["home"] == 5
    assert seen["focused"] == "changes"
    lower = seen["panes"].splitlines()[size[1] // 2 + 2:-2]
    assert lower and all("▏" in line for line in lower[:3]), lower[:3]       # the diff pane's own edge
    plan = [" ".join(line.split()) for line in cli.splitlines() if line.startswith("  ")
            and line.split()[0] in ("write", "delete", "rmdir", "mkdir", "symlink", "replace", "chmod")]
    assert plan and all(row in seen["dialog"] for row in plan), (plan, seen["dialog"])
    assert "chmod" not in seen["dialog"] or any(row.startswith("chmod") for row in plan)
    assert "It overwrites or removes" in seen["dialog"] and "last changed by: " in seen["dialog"]
    assert "<- not written by the agent" in seen["dialog"]
    assert app.return_value is None


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_t_takes_back_the_selected_prompt_and_keeps_the_later_work(tmp_path, size):
    """`t`, beside `r`: the plan of `rewind revert N` for the selected checkpoint, one
    choice and cancel; taking it back merges the later edit of the same file."""
    from types import SimpleNamespace

    from helpers import replayed_session
    root = tmp_path / "proj"
    ten = "".join(f"line {i}\n" for i in range(1, 11))
    write(root, "src/a.py", ten)
    replayed_session(root, tmp_path, "0", [
        [("write", str(root / "x.py"), "x\n")],
        [("bash", "sed -i 's/^line 2$/line 2 bad/' src/a.py && echo c > c.py")],
        [("bash", "sed -i 's/^line 9$/line 9 good/' src/a.py")],
    ], in_process=True)
    before = fingerprint(root)

    async def script(pilot, app, seen):
        await select(pilot, app, "prompt 2")
        await pilot.press("t")
        await pilot.pause(1.5)              # the ages' refresh ticks under the open dialog
        seen["dialog"] = flat(screen_text(app))
        await pilot.press("n")                       # cancel: nothing changes
        await pilot.pause()
        seen["cancelled"] = fingerprint(root)
        await pilot.press("t")
        await pilot.pause()
        await pilot.press("t")
        await pilot.pause()
    app, seen = drive(SimpleNamespace(root=root), size, script)
    dialog = seen["dialog"]
    assert "Take back the agent's changes after checkpoint 2: prompt 2" in dialog, dialog
    assert "merge src/a.py" in dialog and "put back c.py" in dialog, dialog
    assert "t Take back these changes" in dialog and "n Cancel (Esc)" in dialog
    assert "Restore code" not in dialog
    assert seen["cancelled"] == before
    assert app.return_value.startswith("Reverted checkpoint 2: 2 paths changed (1 merged"), app.return_value
    assert (root / "src/a.py").read_text() == ten.replace("line 9\n", "line 9 good\n")
    assert not (root / "c.py").exists()
