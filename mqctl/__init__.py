"""The command line: an mqadmin-style admin tool, local clusters, the report command.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["app", "cli", "collect", "commands", "devcluster", "docgen", "localcluster", "render",
           "render_broker", "render_report", "terminal"]
