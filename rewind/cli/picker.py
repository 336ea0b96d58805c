"""The picker: `rewind` alone on a terminal, or `rewind pick`. Like Claude Code's Esc Esc list:
newest checkpoint at hand, arrow keys, each row the prompt with its change counts and badges;
beside it the selected checkpoint's changes and the diff of the highlighted one.

Keys: up/down (home/end) choose; enter opens the checkpoint's changes, tab moves between the
panes; r restores the checkpoint; f restores only the highlighted file; d shows or hides the
diff; e shows every checkpoint (a rewind's safety checkpoint folds under the one whose tree it
restored, as `rewind list` folds it); q or Esc quits.
A restore shows the same plan as `rewind to`, names what it overwrites that the agent did not
write, and asks as Claude Code's Esc Esc menu does: restore the code, the conversation (a new
transcript that ends before the prompt, for `claude --resume`), both, or cancel. The code
restore takes the same safety checkpoint as `rewind to`, so `rewind undo` goes back.
The prompt column takes the width the other columns leave. A checkpoint still being completed
by the watcher's first scan is a row with a `pending` badge; it is restored once complete (the
picker says so until then; `rewind to N` waits for it).

Built on Textual (from the makers of rich, already a dependency): real widgets, and a test
pilot that drives the app in the tests the way a person would.

Past the house's ~350 lines on purpose: `run_picker` is one Textual app whose keys, rows and
restore dialog share one state (the rows, the selection, the plan); split, that state would be
passed around. Its texts that are not the app's own live apart (restore_view.py, authors.py).
"""

from __future__ import annotations

from rewind.capture.changes import changes_under
from rewind.capture.snapshot import TreeLoader, working_scan
from rewind.cli import pending_view, render
from rewind.cli.list_view import describe, fold_targets, git_line
from rewind.cli.pending_view import is_pending, with_pending
from rewind.cli.authors import who_all
from rewind.cli.restore_view import forked_text, left_alone, not_undone_lines, paths_phrase, rewound_text, view_of
from rewind.errors import RewindError
from rewind.history.conversation import fork, refusal
from rewind.history.restore import restore
from rewind.history.restore_plan import RestorePlan, plan_for_display
from rewind.model import Checkpoint
from rewind.store.treediff import diff_trees
from rewind.structs import dataclass

PLAN_LINES = 500       # operations listed in the dialog; `rewind to N --dry-run` lists them all


@dataclass
class Restored:
    """What the picker restored: the checkpoint, and the plan applied (what it left is said
    once the terminal is back)."""
    target: Checkpoint
    plan: RestorePlan


BY_WIDTH = 24          # the changes table's author column; the diff pane names it whole
GIT_KEY = "\0git"      # the changes table's row for a git move (no path of the tree has a NUL)


def git_by(move) -> str:
    """Who moved git state, as `by` says it for a change."""
    if move.source == "bash" and move.command:
        return f"bash: {render.short(move.command, 30)}"
    return move.source


def by(row, width: int | None = None) -> str:
    """Who made a change, once: `bash: ls -la`, `tool: Edit`, `external`, then its flags; in
    `width` characters, the flags kept whole (`ambiguous` matters more than the command's tail)."""
    from rewind.cli.cmd_show import author
    who = author(row, 30)
    flags = " " + " ".join(row.flags) if row.flags else ""
    if width is not None:
        who = render.short(who, max(8, width - len(flags)))
    return who + flags


def conversation_refusal(cp) -> str | None:
    """Why the conversation of `cp` cannot be restored, or None when it can (nothing is written)."""
    return refusal(cp)


def plan_text(project, cp, plan, paths, working) -> tuple[list[str], list[str]]:
    """The dialog's plan (title, operations, what the agent did not write) and the paths in it
    last changed by someone other than the agent."""
    view = view_of(project, plan, working, only=paths)
    scope = f"only {', '.join(render.display_path(p) for p in paths)} " if paths else ""
    lines = [f"Rewind {scope}to checkpoint {cp.number}: {describe(cp)}"] + ([""] if plan.ops or plan.skipped else [])
    rows = plan.rows()                  # a path a line, as `rewind to` lists them (a mode set is its write's)
    width = max((len(action) for _, action, _ in rows), default=0)
    lines += [f"  {action:<{width}}  {render.display_path(path)}" for path, action, _ in rows[:PLAN_LINES]]
    if len(rows) > PLAN_LINES:
        lines.append(f"  … and {len(rows) - PLAN_LINES} more (`rewind to {cp.number} --dry-run` lists them all)")
    for path, why in plan.skipped[:PLAN_LINES]:
        lines.append(f"  left    {render.display_path(path)} ({why})")
    # as `rewind to` says it: who last changed what it overwrites (a restore's content named
    # by who wrote it first), and what it will not undo
    over = plan.overwrites()
    not_agent = [op.path for op in over if op.path in view.marks]
    if over:
        lines += ["", f"It overwrites or removes {len(over)} of them, changed since checkpoint {cp.number}:"]
        shown = [render.display_path(op.path) for op in over[:PLAN_LINES]]
        pad = max(len(p) for p in shown)
        lines += [f"  {p.ljust(pad)}  {who_all(view.authors.get(op.path))}"
                  + (f"   <- {view.marks[op.path]}" if op.path in view.marks else "")
                  for p, op in zip(shown, over)]
    if not_agent:
        lines.append(f"{len(not_agent)} of the paths it overwrites {'holds' if len(not_agent) == 1 else 'hold'} "
                     "changes by someone other than the agent.")
    effects = not_undone_lines(view.effects, PLAN_LINES)
    return lines + ([""] + effects if effects else []), not_agent


def question(cp, plan, code: bool, not_agent: list[str], refusal: str | None, whole: bool) -> str:
    """What the dialog asks, under the plan."""
    if code:
        count = paths_phrase(plan.count)
        ask = (f"Rewind {count} to checkpoint {cp.number}, overwriting {len(not_agent)} not written by the "
               f"agent?" if not_agent else f"Rewind {count} to checkpoint {cp.number}?")
        lines = [ask + " A safety checkpoint is taken first; `rewind undo` goes back."]
    else:
        lines = [f"The tree already matches checkpoint {cp.number}."]
    if whole:
        lines.append("Conversation: a new session that ends before this prompt; the original transcript is "
                     "untouched." if refusal is None else f"Conversation: not available ({refusal}).")
    return "\n".join(lines)


def run_picker(project):
    """The app for `project` (a Textual App: `.run()` it, or drive it with its test pilot).
    Its return value says what was restored (a line per part), or None; `failure` holds an
    error met on the way, for `pick` to raise once the terminal is back."""
    from rich.console import Group
    from rich.syntax import Syntax
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.binding import Binding
    from textual.containers import Horizontal, Vertical
    from textual.widgets import DataTable, Footer, Header, Static

    from rewind.cli.cmd_diff import unified
    from rewind.cli.list_view import badges, counts_text
    from rewind.cli.restore_dialog import RestoreDialog

    class Picker(App):
        TITLE = "rewind"
        CSS = """
        #left { height: 1fr; }
        #right { height: 1fr; }
        #changes { width: 1fr; }
        #diff { width: 1fr; overflow-y: auto; border-left: vkey $foreground 30%; padding-left: 1; }
        """
        BINDINGS = [Binding("q,escape", "quit", "Quit", key_display="q/Esc"),
                    Binding("r", "restore", "Restore checkpoint"),
                    Binding("t", "revert", "Take back prompt"),
                    Binding("f", "restore_file", "Restore file"), Binding("d", "toggle_diff", "Diff"),
                    Binding("e", "toggle_every", "Every checkpoint"),
                    Binding("home", "first", "First", show=False, priority=True),
                    Binding("end", "last", "Last", show=False, priority=True),
                    Binding("tab", "focus_next", "Switch pane", show=False)]

        def __init__(self):
            super().__init__()
            # as `rewind list` shows them: a rewind's safety checkpoint folded under the
            # checkpoint whose tree it restored, so the prompts are in front (`e`: every one)
            self.every_cp = with_pending(project, project.catalog.checkpoints(project.id))
            undos = project.catalog.undo_safeties(project.id)
            self.folded = fold_targets([c for c in self.every_cp if not is_pending(c)], undos)
            self.task_notes = {c.number for c in self.every_cp if c.folds_under is not None}
            self.every = False
            self.cps = self.shown_cps()
            self.current = None
            self.rows: list = []
            self.pairs: dict = {}
            self.lines: list = []           # per checkpoint: badges, prompt, changes, id, age, kind
            self.filled_width = 0
            self.restored: Restored | None = None     # once the code is restored
            self.failure: RewindError | None = None

        def compose(self) -> ComposeResult:
            yield Header(show_clock=False)
            with Vertical():         # the prompts on top, full width; the changes and diff below
                with Vertical(id="left"):
                    yield DataTable(id="checkpoints", cursor_type="row", zebra_stripes=True)
                with Horizontal(id="right"):
                    yield DataTable(id="changes", cursor_type="row")
                    yield Static(id="diff")
            yield Footer()

        def shown_cps(self) -> list:
            return self.every_cp if self.every else [c for c in self.every_cp if c.number not in self.folded]

        def on_mount(self) -> None:
            self.lines = [self.line(cp) for cp in self.cps]
            self.fill_checkpoints()
            self.set_interval(1.0, self.refresh_ages)     # "2m ago" goes on counting
            changes = self.query_one("#changes", DataTable)
            changes.add_columns("", "by", "path")   # who first: a long path must not push it off
            self.sub_title = project.root
            if self.cps:
                self.show(self.cps[0])
            self.query_one("#checkpoints", DataTable).focus()

        def line(self, cp) -> tuple:
            """A checkpoint's row: badges, prompt, changes, id, age, kind."""
            if is_pending(cp):
                return (pending_view.marks(cp), describe(cp), pending_view.PENDING_COUNTS, str(cp.number),
                        render.age(cp.created_at), cp.kind)
            ch = changes_under(project, cp, self.working())
            under = sorted(n for n, t in self.folded.items() if t == cp.number)
            tasks = [n for n in under if n in self.task_notes]
            under = [n for n in under if n not in self.task_notes]
            # the rewinds (and tasks' notices) folded under it, first (a narrow screen cuts the
            # prompt's tail, not this)
            fold = [] if self.every else \
                ([(f"↳ {'rewinds' if len(under) > 1 else 'rewind'} here: {', '.join(map(str, under))}", "dim")]
                 if under else []) + \
                ([(f"↳ task done: {', '.join(map(str, tasks))}", "dim")] if tasks else [])
            return (fold + pending_view.marks(cp) + badges(ch, sources=False), describe(cp), counts_text(ch),
                    str(cp.number), render.age(cp.created_at), cp.kind)

        def refresh_ages(self) -> None:
            """The age column read again: an open picker's "10s ago" must not stay that. The
            table is on the first screen, under a dialog that may be open (a query of the app
            asks the dialog: a restore dialog open at the tick crashed the picker)."""
            table = self.screen_stack[0].query_one("#checkpoints", DataTable)
            for i, cp in enumerate(self.cps):
                line = self.lines[i]
                age = render.age(cp.created_at)
                if line[4] != age:
                    self.lines[i] = line[:4] + (age,) + line[5:]
                    try:
                        table.update_cell(str(cp.number), "age", age)
                    except Exception:        # the table is being filled again: it reads self.lines
                        pass

        def action_toggle_every(self) -> None:
            self.every = not self.every
            self.cps = self.shown_cps()
            self.lines = [self.line(cp) for cp in self.cps]
            self.fill_checkpoints()
            self.query_one("#checkpoints", DataTable).move_cursor(row=0)
            if self.cps:
                self.show(self.cps[0])

        def action_first(self) -> None:
            self._move_to(0)

        def action_last(self) -> None:
            self._move_to(-1)

        def _move_to(self, index: int) -> None:
            table = self.focused if isinstance(self.focused, DataTable) else self.query_one("#checkpoints", DataTable)
            if table.row_count:
                table.move_cursor(row=index % table.row_count, scroll=True)

        def on_data_table_row_selected(self, event) -> None:
            """Enter on a checkpoint opens its changes (the pane below); `r` restores it."""
            if event.data_table.id == "checkpoints":
                changes = self.query_one("#changes", DataTable)
                if changes.row_count:
                    changes.focus()

        def on_resize(self, event) -> None:
            if self.lines and self.size.width != self.filled_width:
                self.fill_checkpoints()

        def fill_checkpoints(self) -> None:
            """The checkpoints table, its prompt column as wide as the terminal leaves it."""
            table = self.query_one("#checkpoints", DataTable)
            row = table.cursor_row
            table.clear(columns=True)
            # the kind only when some checkpoint is not a prompt (a rewind's, one saved by hand)
            names = ("changes", "id", "age", "kind")[:4 if any(cp.kind != "prompt" for cp in self.cps) else 3]
            widths = [max([len(name)] + [len(line[2 + i]) for line in self.lines]) for i, name in enumerate(names)]
            pad = 2 * table.cell_padding
            rows_shown = (self.size.height - 2) // 2 - 1    # the table has the top half, less its header
            scrollbar = table.styles.scrollbar_size_vertical if len(self.cps) > rows_shown else 0
            self.filled_width = self.size.width
            room = max(20, self.size.width - scrollbar - sum(w + pad for w in widths) - pad)
            table.add_column("prompt", width=room, key="prompt")
            for name, width in zip(names, widths):
                table.add_column(name, width=width, key=name)
            for cp, (marks, prompt, *rest) in zip(self.cps, self.lines):
                rest = rest[:len(names)]
                text = Text()            # user text as Text: never parsed as markup
                for label, style in marks:
                    text.append(f" {label} ", style=f"bold {style} reverse")
                    text.append(" ")
                text.append(prompt)
                text.truncate(room, overflow="ellipsis")
                table.add_row(text, *rest, key=str(cp.number))
            if row:
                table.move_cursor(row=min(row, len(self.cps) - 1), scroll=True)

        _working = None

        def working(self):
            if self._working is None:
                self._working = working_scan(project)
            return self._working

        def show(self, cp) -> None:
            self.current = cp
            if is_pending(cp):
                self.rows, self.pairs = [], {}
                self.query_one("#changes", DataTable).clear()
                self.query_one("#diff", Static).update(Text(
                    f"checkpoint {cp.number} is being completed by the watcher's first scan of the tree: its "
                    f"changes show once it is complete (`rewind to {cp.number}` waits for it)"))
                return
            self.rows = changes_under(project, cp, self.working())
            nxt = project.catalog.next_after(project.id, cp.number)
            load = TreeLoader(project.store, self.working().trees)
            new_root = nxt.tree if nxt else self.working().root
            self.pairs = {p: (o, n, nxt is None) for p, o, n in diff_trees(load, cp.tree, new_root)}
            table = self.query_one("#changes", DataTable)
            table.clear()
            for r in self.rows:
                table.add_row({"added": "A", "modified": "M", "deleted": "D"}[r.status],
                              Text(by(r, BY_WIDTH)), Text(render.display_path(r.path)), key=r.path)
            move = getattr(self.rows, "git", None)
            if move is not None:         # git state: a row of its own, after the tree's changes
                table.add_row("G", Text(render.short(git_by(move), BY_WIDTH)), Text(f"git: {move.text()}"), key=GIT_KEY)
            self.show_diff(self.rows[0].path if self.rows else GIT_KEY if move is not None else None)

        def show_diff(self, path) -> None:
            pane = self.query_one("#diff", Static)
            move = getattr(self.rows, "git", None)
            if path == GIT_KEY and move is not None:
                pane.update(Text(f"git moved: {git_line(move)}\n\nHEAD and branches are git state, not files "
                                 "of the tree: a restore leaves them where they are."))
                return
            if path is None or path not in self.pairs:
                pane.update(Text("no changes after this checkpoint" if not self.rows else ""))
                return
            old, new, on_disk = self.pairs[path]
            try:
                text, _, _ = unified(project, path, old, new, on_disk)
            except Exception as e:     # a file that vanished meanwhile: say so, keep going
                text = f"diff {render.display_path(path)}\n({e})\n"
            row = next((r for r in self.rows if r.path == path), None)
            head = Text(f"by {by(row)}", style="bold") if row is not None else Text("")
            pane.update(Group(head, Syntax(text, "diff", theme="ansi_dark", word_wrap=False)))

        def on_data_table_row_highlighted(self, event) -> None:
            if event.data_table.id == "checkpoints":
                if event.row_key is None or event.cursor_row != event.data_table.cursor_row:
                    return               # from before the table was filled again (a resize)
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
            elif getattr(self.rows, "git", None) is not None and self.query_one("#changes", DataTable).cursor_row \
                    == len(self.rows):
                self.notify("git state is not a file: a restore leaves HEAD and branches where they are "
                            "(`git switch` or `git reset` moves them)")

        def _selected(self):
            """The selected checkpoint, completed if it was pending; None (and why) if it is not yet."""
            cp = self.current
            if cp is not None and is_pending(cp):
                cp = self.completed(cp)
            return cp

        def _restore(self, paths) -> None:
            cp = self._selected()
            if cp is None:
                return
            # its own scan: it reads what the checkpoint holds even where today's rules ignore it
            plan = plan_for_display(project, cp, paths)
            code = not (plan.empty and not plan.skipped)
            whole = paths is None              # one file's restore leaves the conversation be
            refusal = conversation_refusal(cp) if whole else None
            talk = whole and refusal is None
            if not code and not talk:
                self.notify(f"the tree already matches checkpoint {cp.number}")
                return
            choices = [c for c, offered in (("code", code), ("conversation", talk), ("both", code and talk)) if offered]
            lines, not_agent = plan_text(project, cp, plan, paths, self.working())
            asked = question(cp, plan, code, not_agent, refusal, whole)
            self.push_screen(RestoreDialog(Text("\n".join(lines)), Text(asked), choices),
                             lambda choice: self.do(cp, paths, choice))

        def action_revert(self) -> None:
            """Take back the selected checkpoint's changes (the agent's), keeping the rest:
            the plan of `rewind revert N`, then the question."""
            from rewind.cli.cmd_revert import plan_now, revert_lines, revert_view
            from rewind.history.revert import AGENT_SOURCES, WRITES, intervals
            cp = self._selected()
            if cp is None:
                return
            try:
                cps = intervals(project, cp)
                current, rp, plan = plan_now(project, cps, AGENT_SOURCES, None, "skip")
            except RewindError as e:
                self.notify(e.message, severity="error")
                return
            if plan.empty:
                self.notify(f"nothing of checkpoint {cp.number}'s changes to take back"
                            + (f" ({len(rp.conflicts)} in conflict: `rewind revert {cp.number}` lists them)"
                               if rp.conflicts else ""))
                return
            lines = [f"Take back the agent's changes after checkpoint {cp.number}: {describe(cp)}", ""] + \
                revert_lines(rp, plan, revert_view(project, plan, current, rp.numbers))
            conflicts = len({o.path for o in rp.conflicts})
            asked = (f"Take back {paths_phrase(len({o.path for o in rp.outcomes if o.outcome in WRITES}))}"
                     + (f", leaving {conflicts} in conflict as they are" if conflicts else "")
                     + "? A safety checkpoint is taken first; `rewind undo` goes back.")
            self.push_screen(RestoreDialog(Text("\n".join(lines)), Text(asked), ["revert"]),
                             lambda choice: self.do_revert(cps, choice))

        def do_revert(self, cps, choice: str | None) -> None:
            if choice is None:
                return
            from rewind.cli.cmd_revert import revert_done_text
            from rewind.history.revert import AGENT_SOURCES, plan_revert
            try:
                result = restore(project, cps[-1], None, revert=lambda cur: plan_revert(
                    project, cps, cur, AGENT_SOURCES, None, "skip"))
                self.restored = Restored(cps[-1], result.plan)
                self.exit(revert_done_text(result.plan.revert, result.safety))
            except RewindError as e:
                self.failure = e
                self.exit(None)

        def completed(self, cp):
            """A pending checkpoint, if it is complete by now (its row then shows it so);
            else None, and why it cannot be restored yet."""
            done = project.catalog.checkpoint(project.id, cp.number)
            if done is None:
                self.notify(f"checkpoint {cp.number} is still being completed by the watcher's first scan of the "
                            f"tree; it can be restored once complete (`rewind to {cp.number}` waits for it)",
                            severity="warning")
                return None
            i = self.cps.index(cp)
            self.cps[i], self.lines[i] = done, self.line(done)
            self.fill_checkpoints()
            self.show(done)
            return done

        def do(self, cp, paths, choice: str | None) -> None:
            """Carry out the dialog's choice; the app ends with what was done (errors are
            raised once the screen is back, by `pick`)."""
            if choice is None:
                return
            said = []
            try:
                if choice in ("code", "both"):
                    result = restore(project, cp, paths)
                    self.restored = Restored(cp, result.plan)
                    said.append(rewound_text(cp, result.safety, result.plan, paths))
                if choice in ("conversation", "both"):
                    new_id, written = fork(cp, root=project.root)
                    said.append(forked_text(cp, new_id, project.root, written))
            except RewindError as e:
                self.failure = e
            self.exit("\n".join(said) or None)

    return Picker()


def pick(project) -> None:
    app = run_picker(project)
    result = app.run()
    if result:
        render.out(result)
    if app.failure is not None:
        raise app.failure
    if app.restored is not None:
        left_alone(app.restored.plan, "the rewind", f"rewind to {app.restored.target.number}")
