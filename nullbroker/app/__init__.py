"""The `nullbroker` command: its entry point, the CLI, and the fault command."""
