"""The environment as the watchers tell theirs apart: the entries whose difference changes what
a hook does or where it writes. A watcher serves only calls whose entries (SAME_ENV and every
REWIND_*, less the call's own) are its own (watch/serve.py); a server of another
environment's hooks (watch/envserver.py) has a socket named by `env_key`. Standard library
only, no imports at all: the thin hook (hooks/client.py) imports it where such a server runs.
(CLAUDE_PROJECT_DIR, GEMINI_PROJECT_DIR and REWIND_HOOK_TRACE are the call's own.)
"""

SAME_ENV = ("REWIND_HOME", "REWIND_WATCH", "REWIND_CONFIG_HOME", "REWIND_NOW", "REWIND_TESTING",
            "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "QWEN_HOME", "COPILOT_HOME", "HOME",
            "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
PER_CALL_ENV = frozenset({"CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "QWEN_PROJECT_DIR", "REWIND_HOOK_TRACE"})
_SAME_B = frozenset(k.encode() for k in SAME_ENV)
_PER_CALL_B = frozenset(k.encode() for k in PER_CALL_ENV)


def env_key(env) -> bytes:
    """The environment as the watchers tell theirs apart (SAME_ENV and every REWIND_*, less
    the per-call entries; bytes keys and values): 16 hex digits of FNV-1a, computed without
    hashlib (the thin hook imports this) and the same in every process. A test keeps it
    equal to serve.py's comparison."""
    h = 0xCBF29CE484222325
    for k in sorted(k for k in env if (k in _SAME_B or k.startswith(b"REWIND_")) and k not in _PER_CALL_B):
        for byte in k + b"=" + env[k] + b"\0":
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return b"%016x" % h
