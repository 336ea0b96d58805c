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


# Named cases: callers and tests tell these apart; the CLI prints them all the same way.

class SchemaTooNew(RewindError):
    """The catalog was written by a newer rewind."""


class GcStopped(RewindError):
    """gc found something it must not sweep past (a damaged tree a checkpoint needs) and
    stopped before deleting anything."""


class UnsafePath(RewindError):
    """A restore would have to follow a symlink (or leave the project) to reach a path."""


class DamagedCopy(RewindError):
    """A file a restore overwrites has a damaged stored copy and no longer matches it."""


class UndoUnavailable(RewindError):
    """There is no restore to undo, or its safety checkpoint is gone."""


class RefusedRoot(RewindError):
    """A directory rewind does not take as a project (its own data dir, /, home...)."""


class OutsideProject(RewindError):
    """A path given on the command line is outside the project."""


class SettingsFileInvalid(RewindError):
    """An agent's settings file is not JSON rewind can merge into; it is left untouched."""


class ExportRefused(RewindError):
    """`rewind export` cannot write there (no repository, bad or existing branch)."""


class ConversationUnavailable(RewindError):
    """A checkpoint's conversation cannot be forked (no transcript, another agent...)."""


class PathsChangedDuringRestore(RewindError):
    """Paths changed after the safety checkpoint; the restore left them as they are."""


class RestoreIncomplete(RewindError):
    """Paths the target holds that the restore left as they are (unreadable now, on another
    mount, a directory holding what rewind does not store); the rest was done."""


class RestoreStopped(RewindError):
    """A restore stopped part-way (or before its first step); the message says where the
    tree stands and how to get back."""
