"""The servers: controllers, brokers, and what both use (common, the remoting codec).

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["broker", "common", "controller", "remoting"]
