"""The command line: an mqadmin-style admin tool, local clusters, the report command.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["app", "cli", "cluster", "collect", "commands", "docgen", "javajson", "options", "render",
           "render_broker", "render_consume", "render_message", "render_report", "terminal"]
