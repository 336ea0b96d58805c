"""The conversation fork's refusals, on transcripts it cannot use (the real format is
exercised end to end with Claude Code in test_e2e_claude.py)."""

from __future__ import annotations

import json

import pytest

from rewind.errors import RewindError
from rewind.history.conversation import fork
from rewind.model import Checkpoint


def cp(tmp_path, lines, **kw) -> Checkpoint:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    base = dict(project_id=1, number=2, kind="prompt", created_at="", created_ns=0, tree="", agent="claude",
                session_id="s", prompt_id="p2", transcript_path=str(path), message="second")
    return Checkpoint(**{**base, **kw})


def user(text, pid, sid="s"):
    return {"type": "user", "promptId": pid, "sessionId": sid, "message": {"role": "user", "content": text}}


def test_the_cut_is_before_the_prompt_and_every_entry_moves_to_the_new_session(tmp_path):
    c = cp(tmp_path, [user("first", "p1"), {"type": "assistant", "sessionId": "s", "message": {"content": []}},
                      "this line is not JSON", {"type": "queue-operation", "sessionId": "s"},
                      user("second", "p2"), {"type": "assistant", "sessionId": "s"}])
    new_id, path = fork(c)
    got = open(path).read().splitlines()
    assert [json.loads(x)["sessionId"] for x in got if x.startswith("{")] == [new_id, new_id]
    assert "this line is not JSON" in got and len(got) == 3          # the queueing of "second" is cut
    assert open(c.transcript_path).read().count("second") == 1        # the original is untouched


def test_by_prompt_text_when_the_agent_sent_no_prompt_id(tmp_path):
    c = cp(tmp_path, [user("first", None), {"type": "assistant", "sessionId": "s"}, user("second", None)],
           prompt_id=None)
    _, path = fork(c)
    assert "second" not in open(path).read()


@pytest.mark.parametrize("case, message", [
    ("format", "does not understand"), ("first", "before the first prompt"), ("missing", "cannot read"),
    ("agent", "Claude Code sessions")])
def test_refusals_are_clear(tmp_path, case, message):
    if case == "format":
        c = cp(tmp_path, [{"kind": "something else entirely"}])
    elif case == "first":
        c = cp(tmp_path, [user("second", "p2")])
    elif case == "missing":
        c = cp(tmp_path, [], transcript_path=str(tmp_path / "gone.jsonl"))
    else:
        c = cp(tmp_path, [], agent="gemini")
    with pytest.raises(RewindError, match=message):
        fork(c)
