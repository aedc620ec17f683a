"""Delayed and timed messages: held in the store's schedule topics and delivered to their real topic when
due (levels.py: the rules and the rewrite; due_queue.py: what is due, pure; delay_offsets.py: the delivery
progress on disk and on the wire; service.py: the loop that delivers on the master; retry.py: what a
consumer's failed message becomes).

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["delay_offsets", "due_queue", "levels", "retry", "service"]
