"""spark-submit entry points.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["epoch_history"]
