"""Master-to-slave replication: frames, authenticated sessions, the socket loops.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["auth", "flow", "frames", "master", "protocol", "session", "slave"]
