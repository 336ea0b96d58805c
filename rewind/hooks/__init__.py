"""Agent adapters: one module per agent, registered here by name."""

ADAPTERS = {
    "claude": "rewind.hooks.claude",
    "gemini": "rewind.hooks.gemini",
    "codex": "rewind.hooks.codex",
    "cursor": "rewind.hooks.cursor",
    "generic": "rewind.hooks.generic",
}
