"""The broker's remoting processors, one per concern, as RocketMQ's broker has them; remoting.py registers
their methods in one dispatch table by request code. Each is built with the parts of the broker it reads.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["admin", "client_manage", "common", "consumer_manage", "end_transaction", "offset_reset", "pull", "query", "query_message", "send", "stats"]
