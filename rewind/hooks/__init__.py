"""Agent adapters: one module per agent, registered here by name."""

ADAPTERS = {
    "claude": "rewind.hooks.claude",
}
