"""The picker, driven by Textual's pilot on a project recorded through the real hooks,
asserting on what the screen shows."""

from __future__ import annotations

import asyncio
import io

from helpers import project, write
from rewind.cli.replay import bundled_session, fill, hook_in_process, replay


def screen_text(app) -> str:
    """The screen as a person reads it (what export_screenshot draws, as plain text)."""
    from rich.console import Console
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def recorded(tmp_path):
    root = tmp_path / "proj"
    for name, text in {"README.md": "# demo project\n", "config.ini": "[core]\nname = demo\nlevel = 1\n",
                       "old.log": "stale log line\n", "a.txt": "alpha\n"}.items():
        write(root, name, text)
    session = [fill(p, str(root), "s-picker", str(tmp_path / "cfg")) for p in bundled_session()]
    for p in session:
        if p["hook_event_name"] == "UserPromptSubmit" and p["prompt"].startswith("Create the app"):
            p["prompt"] = "Make [red]x[/red] bold [b] please"
    replay(session, hook_in_process(str(root)))
    return root


def test_prompts_badges_and_authors_show_literally_at_80x24(tmp_path):
    from rewind.cli.picker import run_picker
    root = recorded(tmp_path)
    proj = project(root)
    app = run_picker(proj)
    seen = {}

    async def drive():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            last = app.cps[-1]                                  # the first prompt: a bash marker
            for _ in range(len(app.cps) - 1):
                await pilot.press("down")
            await pilot.pause()
            assert app.current.number == last.number
            seen["screen"] = screen_text(app)
            seen["by"] = [str(app.query_one("#changes").get_row_at(i)[2]) for i in range(len(app.rows))]
    asyncio.run(drive())
    proj.close()
    screen = seen["screen"]
    assert "[red]x[/red] bold [b]" in app_text(screen)         # user text never parsed as markup
    assert " bash " in screen                                  # the badge renders
    assert any(b.startswith("bash: ") and "Bash" not in b for b in seen["by"]), seen["by"]
    assert any(b == "tool: Write" for b in seen["by"]), seen["by"]
    assert not any(b.startswith("bash: Bash") or b.startswith("tool: Write:") for b in seen["by"])


def app_text(screen: str) -> str:
    return " ".join(screen.split())


def test_wide_screen_and_the_dialog_reads_and_n_changes_nothing(tmp_path):
    from helpers import fingerprint
    from rewind.cli.picker import run_picker
    root = recorded(tmp_path)
    before = fingerprint(root)
    proj = project(root)
    app = run_picker(proj)
    seen = {}

    async def drive():
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            seen["wide"] = screen_text(app)
            await pilot.press("down", "r")
            await pilot.pause()
            seen["dialog"] = screen_text(app)
            await pilot.press("n")
            await pilot.pause()
            await pilot.press("q")
    asyncio.run(drive())
    proj.close()
    assert "Make [red]x[/red] bold [b] please" in seen["wide"] and " bash " in seen["wide"]
    assert "Restore? y: yes / n: no" in seen["dialog"]
    assert app.return_value is None and fingerprint(root) == before
