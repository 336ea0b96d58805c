"""A restore's plan names every author whose content it overwrites, not only the last one:
the line you appended to README.md after checkpoint 2, then the agent's edit of the same
file, make `to 2` say "changed by: external, then tool (Write)" and count it as not written
by the agent; for `to`, `to -- PATH`, the JSON plan and the picker's plan alike.

Sessions are replayed through real `rewind hook claude` processes (the payloads Claude Code
sent), the person's edit made for real between prompts, watcher off and on.
"""

from __future__ import annotations

import json

import pytest

from helpers import replayed_session, run_rewind, write

WATCH = pytest.mark.parametrize("watch", ["0", "1"], ids=["hooks-only", "with-watcher"])


def _project(tmp_path, watch):
    root = tmp_path / "proj"
    write(root, "README.md", "# demo\n")
    write(root, "src/a.py", "a = 1\n")

    def person(i):
        if i == 2:                # after checkpoint 2's prompt, before prompt 3: the person appends
            with open(root / "README.md", "a") as f:
                f.write("a line of mine\n")

    replayed_session(root, tmp_path, watch, [
        [("write", str(root / "src/a.py"), "a = 2\n")],
        [("bash", "echo b > b.txt")],
        [("write", str(root / "README.md"), "# demo\na line of mine\nand the agent's\n")],
        [("bash", "echo c > c.txt")],
    ], between=person)
    return root


@WATCH
def test_the_plan_names_the_persons_edit_under_the_agents_later_one(tmp_path, watch):
    root = _project(tmp_path, watch)
    env = {"REWIND_WATCH": watch}
    for args in (["to", "2", "--dry-run"], ["to", "2", "--dry-run", "--", "README.md"]):
        out = run_rewind(*args, cwd=root, env=env, check=0).stdout
        line = next(x for x in out.splitlines() if x.lstrip().startswith("README.md") and "by" in x)
        assert line.split("README.md", 1)[1].strip() == \
            "changed by: external, then tool (Write)   <- not written by the agent", out
    # src/a.py was only ever the agent's (prompt 1): one author, no mark
    out = run_rewind("to", "1", "--dry-run", cwd=root, env=env, check=0).stdout
    a = next(x for x in out.splitlines() if x.lstrip().startswith("src/a.py") and "by" in x)
    assert a.split("src/a.py", 1)[1].strip() == "last changed by: tool (Write)", out
    plan = json.loads(run_rewind("to", "2", "--dry-run", "--json", cwd=root, env=env, check=0).stdout)
    readme = next(p for p in plan["paths"] if p["path"] == "README.md")
    assert [a["source"] for a in readme["authors"]] == ["external", "tool"], readme
    assert readme["notice"] == "not written by the agent"
    assert readme["current_author"]["source"] == "tool"         # the field it always had: the last one
    # the restore says it before it writes, and puts back checkpoint 2's README.md
    done = run_rewind("to", "2", "--yes", "--", "README.md", cwd=root, env=env, check=0).stdout
    assert "1 of the paths it overwrites holds changes by someone other than the agent (you, another session or process)" in done
    assert (root / "README.md").read_text() == "# demo\n"
    assert "It will not undo" not in done


def test_the_pickers_plan_names_every_author_too(tmp_path):
    from rewind.cli.picker import plan_text
    from rewind.history.restore_plan import plan_for_display
    from rewind.project import open_project
    root = _project(tmp_path, "0")
    project = open_project(str(root), create=False)
    try:
        cp = project.catalog.checkpoint(project.id, 2)
        lines, not_agent = plan_text(project, cp, plan_for_display(project, cp, None), None, None)
    finally:
        project.close()
    assert not_agent == ["README.md"]
    assert "  README.md  changed by: external, then tool (Write)   <- not written by the agent" in lines, lines
