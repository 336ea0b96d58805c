"""The prompt's checkpoint decision (hooks/prompt.py `decide`): one function over named facts."""

import pytest

from rewind.hooks.prompt import PENDING, PENDING_GRACE, SCAN_NOW, PromptFacts, decide


def facts(**given) -> PromptFacts:
    base = dict(after_edit_only=False, watcher_on=True, first_scan_running=True, first_scan_young=False,
                tree_big=None, lock_busy=False)
    return PromptFacts(**{**base, **given})


@pytest.mark.parametrize("given, expected", [
    (dict(first_scan_running=False), SCAN_NOW),                          # no first scan to pend on
    (dict(after_edit_only=True), SCAN_NOW),                              # Cursor: nothing to put back
    (dict(after_edit_only=True, first_scan_young=True), SCAN_NOW),
    (dict(), PENDING),                                                   # not looked up yet: plain pending
    (dict(first_scan_young=True), PENDING_GRACE),                        # never scanned: may be small
    (dict(first_scan_young=True, tree_big=False), PENDING_GRACE),
    (dict(first_scan_young=True, tree_big=True), PENDING),               # a big tree is not done soon
    (dict(first_scan_young=False, tree_big=False), PENDING),             # an old scan: not a small tree
    (dict(lock_busy=True), PENDING),                                     # a retry behind the lock
    (dict(lock_busy=True, first_scan_running=False), SCAN_NOW),
])
def test_a_prompt_pends_only_on_a_running_first_scan_and_waits_only_for_a_young_one(given, expected):
    assert decide(facts(**given)) == expected


def test_the_decision_is_a_named_record_of_its_facts():
    f = facts(first_scan_young=True)
    assert f.first_scan_young and f.tree_big is None and f._fields == (
        "after_edit_only", "watcher_on", "first_scan_running", "first_scan_young", "tree_big", "lock_busy")
    with pytest.raises(AttributeError):
        f.tree_big = True                   # frozen: gathered once, then decided on
