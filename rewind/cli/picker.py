"""The picker: `rewind` alone on a terminal, or `rewind pick`. Like Claude Code's Esc Esc list:
newest checkpoint at hand, arrow keys, each row the prompt with its change counts and badges;
beside it the selected checkpoint's changes and the diff of the highlighted one.

Keys: up/down choose; tab moves between the checkpoints and their changes; enter or r restores
the checkpoint; f restores only the highlighted file; d shows or hides the diff; q quits.
A restore shows the same plan as `rewind to`, names what it overwrites that the agent did not
write, and asks; it takes the same safety checkpoint, so `rewind undo` goes back.

Built on Textual (from the makers of rich, already a dependency): real widgets, and a test
pilot that drives the app in the tests the way a person would.
"""

from __future__ import annotations

from rewind.capture.changes import changes_under
from rewind.capture.snapshot import TreeLoader, working_scan
from rewind.cli import render
from rewind.diff import diff_trees
from rewind.history.restore import restore
from rewind.history.restore_plan import plan_for_display


def by(row) -> str:
    """Who made a change, once: `bash: ls -la`, `tool: Edit`, `external`, then its flags."""
    if row.source == "bash" and row.command:
        who = f"bash: {render.short(row.command, 30)}"
    elif row.source == "tool" and row.tool:
        who = f"tool: {render.safe(row.tool)}"
    else:
        who = row.source
    return who + (" " + " ".join(row.flags) if row.flags else "")


def run_picker(project):
    """The app for `project` (a Textual App: `.run()` it, or drive it with its test pilot).
    Its return value is a line saying what was restored, or None."""
    from rich.syntax import Syntax
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.binding import Binding
    from textual.containers import Horizontal, Vertical
    from textual.screen import ModalScreen
    from textual.widgets import DataTable, Footer, Header, Label, Static

    from rewind.cli.cmd_diff import unified
    from rewind.cli.list_view import badges, counts_text, describe

    class Confirm(ModalScreen[bool]):
        BINDINGS = [Binding("y", "yes", "Yes"), Binding("n,escape", "no", "No")]

        def __init__(self, text: str):
            super().__init__()
            self.text = text

        def compose(self) -> ComposeResult:
            with Vertical(id="dialog"):
                yield Static(Text(self.text), id="plan")
                yield Label(Text("Restore? y: yes / n: no"))

        def action_yes(self) -> None:
            self.dismiss(True)

        def action_no(self) -> None:
            self.dismiss(False)

    class Picker(App):
        TITLE = "rewind"
        CSS = """
        #left { height: 1fr; }
        #right { height: 1fr; }
        #changes { width: 1fr; }
        #diff { width: 1fr; overflow-y: auto; }
        #dialog { padding: 1 2; border: thick $accent; background: $panel; width: 90%; height: auto;
                  max-height: 90%; margin: 2 4; }
        """
        BINDINGS = [Binding("q,escape", "quit", "Quit"), Binding("enter,r", "restore", "Restore checkpoint"),
                    Binding("f", "restore_file", "Restore file"), Binding("d", "toggle_diff", "Diff"),
                    Binding("tab", "focus_next", "Switch pane", show=False)]

        def __init__(self):
            super().__init__()
            self.cps = project.catalog.checkpoints(project.id)
            self.current = None
            self.rows: list = []
            self.pairs: dict = {}

        def compose(self) -> ComposeResult:
            yield Header(show_clock=False)
            with Vertical():         # the prompts on top, full width; the changes and diff below
                with Vertical(id="left"):
                    yield DataTable(id="checkpoints", cursor_type="row", zebra_stripes=True)
                with Horizontal(id="right"):
                    yield DataTable(id="changes", cursor_type="row")
                    yield Static(id="diff")
            yield Footer()

        def on_mount(self) -> None:
            table = self.query_one("#checkpoints", DataTable)
            table.add_columns("prompt", "changes", "id", "age", "kind")
            for cp in self.cps:
                ch = changes_under(project, cp, self.working())
                prompt = Text()          # user text as Text: never parsed as markup
                for label, style in badges(ch):
                    prompt.append(f" {label} ", style=f"bold {style} reverse")
                    prompt.append(" ")
                prompt.append(render.short(describe(cp), 70))
                table.add_row(prompt, counts_text(ch), str(cp.number), render.age(cp.created_at), cp.kind,
                              key=str(cp.number))
            changes = self.query_one("#changes", DataTable)
            changes.add_columns("", "path", "by")
            self.sub_title = project.root
            if self.cps:
                self.show(self.cps[0])
            table.focus()

        _working = None

        def working(self):
            if self._working is None:
                self._working = working_scan(project)
            return self._working

        def show(self, cp) -> None:
            self.current = cp
            self.rows = changes_under(project, cp, self.working())
            nxt = project.catalog.next_after(project.id, cp.number)
            load = TreeLoader(project.store, self.working().trees)
            new_root = nxt.tree if nxt else self.working().root
            self.pairs = {p: (o, n, nxt is None) for p, o, n in diff_trees(load, cp.tree, new_root)}
            table = self.query_one("#changes", DataTable)
            table.clear()
            for r in self.rows:
                table.add_row({"added": "A", "modified": "M", "deleted": "D"}[r.status],
                              Text(render.display_path(r.path)), Text(by(r)), key=r.path)
            self.show_diff(self.rows[0].path if self.rows else None)

        def show_diff(self, path) -> None:
            pane = self.query_one("#diff", Static)
            if path is None or path not in self.pairs:
                pane.update(Text("no changes after this checkpoint" if not self.rows else ""))
                return
            old, new, on_disk = self.pairs[path]
            try:
                text, _, _ = unified(project, path, old, new, on_disk)
            except Exception as e:     # a file that vanished meanwhile: say so, keep going
                text = f"diff {path}\n({e})\n"
            pane.update(Syntax(text, "diff", theme="ansi_dark", word_wrap=False))

        def on_data_table_row_highlighted(self, event) -> None:
            if event.data_table.id == "checkpoints":
                number = int(event.row_key.value)
                cp = next(c for c in self.cps if c.number == number)
                if self.current is None or cp.number != self.current.number:
                    self.show(cp)
            elif event.data_table.id == "changes" and event.row_key is not None:
                self.show_diff(event.row_key.value)

        def action_toggle_diff(self) -> None:
            pane = self.query_one("#diff", Static)
            pane.display = not pane.display

        def _selected_path(self) -> str | None:
            table = self.query_one("#changes", DataTable)
            if not self.rows or table.cursor_row is None or table.cursor_row >= len(self.rows):
                return None
            return self.rows[table.cursor_row].path

        def action_restore(self) -> None:
            self._restore(None)

        def action_restore_file(self) -> None:
            path = self._selected_path()
            if path is not None:
                self._restore([path])

        def _restore(self, paths) -> None:
            cp = self.current
            if cp is None:
                return
            plan = plan_for_display(project, cp, paths, self.working())
            if plan.empty and not plan.skipped:
                self.notify(f"the tree already matches checkpoint {cp.number}")
                return
            from rewind.cli.restore_view import AGENT_SOURCES, latest_changes
            over = plan.overwrites()
            latest = latest_changes(project, cp.number, {op.path for op in over}, self.working()) if over else {}
            lines = [f"Rewind {'only ' + ', '.join(paths) + ' ' if paths else ''}to checkpoint {cp.number}: "
                     f"{render.short(describe(cp), 60)}", ""]
            for op in plan.ops[:30]:
                lines.append(f"  {op.action:<7} {render.display_path(op.path)}")
            if len(plan.ops) > 30:
                lines.append(f"  … and {len(plan.ops) - 30} more")
            not_agent = [p for p, r in latest.items() if r.source not in AGENT_SOURCES]
            if not_agent:
                lines += ["", f"{len(not_agent)} of them were last changed by someone other than the agent:"]
                lines += [f"  {render.display_path(p)}" for p in not_agent[:10]]
            lines += ["", "A safety checkpoint is taken first; `rewind undo` goes back."]

            def done(yes: bool) -> None:
                if not yes:
                    return
                safety, _, ops = restore(project, cp, paths)
                self.exit(f"Rewound {'only ' + ', '.join(paths) + ' ' if paths else ''}to checkpoint "
                          f"{cp.number}: {ops} operation(s). The tree from before is checkpoint "
                          f"{safety.number}; `rewind undo` goes back.")
            self.push_screen(Confirm("\n".join(lines)), done)

    return Picker()


def pick(project) -> None:
    result = run_picker(project).run()
    if result:
        render.out(result)
