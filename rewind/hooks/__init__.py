"""Agent adapters: one module per agent, registered here by name."""

ADAPTERS = {
    "claude": "rewind.hooks.claude",
    "gemini": "rewind.hooks.gemini",
    "codex": "rewind.hooks.codex",
    "qwen": "rewind.hooks.qwen",
    "copilot": "rewind.hooks.copilot",
    "opencode": "rewind.hooks.opencode",
    "cline": "rewind.hooks.cline",
    "cursor": "rewind.hooks.cursor",
    "generic": "rewind.hooks.generic",
}
