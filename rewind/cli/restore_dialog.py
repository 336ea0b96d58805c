"""The picker's restore dialog, as Claude Code's Esc Esc menu offers it: restore the code, the
conversation, or both, or cancel. The plan sits in a scrolling box of bounded height and the
question and choices are docked under it, so they show whole however long the plan is.

Imported by the picker only (Textual is not loaded by any other command).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

# (what the dialog returns, its key, its label); the conversation ones only where it can fork
CHOICES = (("code", "c", "Restore code"), ("conversation", "v", "Restore conversation"),
           ("both", "b", "Restore code and conversation"), ("revert", "t", "Take back these changes"),
           ("cancel", "n", "Cancel"))


class RestoreDialog(ModalScreen[str | None]):
    """Dismissed with "code", "conversation", "both" (a restore), "revert" (a revert's
    dialog), or None for cancel."""

    CSS = """
    RestoreDialog { align: center middle; }
    #dialog { width: 100%; max-width: 120; height: auto; max-height: 100%; padding: 0 1;
              border: thick $accent; background: $panel; }
    #plan { height: auto; max-height: 100%; }
    #ask { dock: bottom; height: auto; padding-top: 1; }
    #choices { height: auto; border: none; padding: 0; background: $panel; }
    """
    BINDINGS = [Binding("c", "choose('code')", "Restore code", show=False),
                Binding("v", "choose('conversation')", "Restore conversation", show=False),
                Binding("b", "choose('both')", "Restore code and conversation", show=False),
                Binding("t", "choose('revert')", "Take back these changes", show=False),
                Binding("n,escape", "choose('cancel')", "Cancel", show=False),
                Binding("pageup", "scroll_plan(-1)", "Scroll the plan up", show=False, priority=True),
                Binding("pagedown", "scroll_plan(1)", "Scroll the plan down", show=False, priority=True)]

    def __init__(self, plan: Text, question: Text, choices: list[str]):
        super().__init__()
        self.plan = plan
        self.question = question
        self.choices = [c for c in choices if c != "cancel"] + ["cancel"]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            with Vertical(id="ask"):          # docked first, so the plan gets what is left
                yield Static(self.question, id="question")
                yield Static(id="hint")
                yield OptionList(*[Option(Text(f"{key}  {label}" + (" (Esc)" if name == "cancel" else "")), id=name)
                                   for name, key, label in CHOICES if name in self.choices], id="choices")
            with VerticalScroll(id="plan"):
                yield Static(self.plan)

    def on_mount(self) -> None:
        self.query_one("#choices", OptionList).focus()
        self.call_after_refresh(self._hint)

    def _hint(self) -> None:
        """Say how to see the rest of a plan taller than its box."""
        hint = self.query_one("#hint", Static)
        hint.display = self.query_one("#plan", VerticalScroll).max_scroll_y > 0
        hint.update(Text("PgUp/PgDn scroll the plan; up/down and enter, or a key, choose:", style="dim"))

    def action_scroll_plan(self, pages: int) -> None:
        plan = self.query_one("#plan", VerticalScroll)
        if pages > 0:
            plan.scroll_page_down(animate=False)
        else:
            plan.scroll_page_up(animate=False)

    def action_choose(self, name: str) -> None:
        if name in self.choices:
            self.dismiss(None if name == "cancel" else name)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_choose(event.option.id or "cancel")
