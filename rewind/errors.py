"""One error hierarchy. The CLI's single handler turns these into `error: ...` and an exit code."""

from __future__ import annotations


class RewindError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(RewindError):
    exit_code = 2


class NotInProject(RewindError):
    pass


class CheckpointNotFound(RewindError):
    pass


class CorruptObject(RewindError):
    """An object is missing or does not hash to its name."""

    def __init__(self, digest: str, problem: str):
        super().__init__(f"object {digest[:12]} is {problem}",
                         hint="run `rewind verify` to see every damaged object")
        self.digest = digest
        self.problem = problem


class StoreLocked(RewindError):
    exit_code = 11


class Refused(RewindError):
    """The command would do something the person has not confirmed."""
