"""The read model: the log folded once, answering every reader (the CLI, the dashboard)."""
