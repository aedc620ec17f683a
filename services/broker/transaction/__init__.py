"""Transactional messages, RocketMQ's two-phase model: a half message held invisibly until its producer
commits or rolls it back, and a check-back that asks the producer group when it does not (half.py: the
rules and the rewrites, pure; checks.py: which half messages are resolved or need a check, pure; progress.py:
the check progress on disk and on the wire; service.py: END_TRANSACTION's writes and the check loop on the
master).

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["checks", "half", "progress", "service"]
