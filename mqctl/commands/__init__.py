"""One module per group of commands; each has a ``COMMANDS`` list the CLI registers.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["broker", "brokeradmin", "brokerconfig", "cluster", "consume", "controller", "flush", "namesrv", "quickstart",
           "report", "store", "subgroup", "tls", "topic"]
