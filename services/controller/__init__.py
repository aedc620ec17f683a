"""The controller: the Raft-replicated state machine, its HTTP and remoting APIs.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["api", "cli", "config", "console", "console_brokers", "console_consumers", "contract", "controller", "elect_policy", "events", "heartbeat", "kv_config", "metrics",
           "namesrv", "namesrv_admin", "namesrv_remoting", "notifier", "raft", "raft_fork", "raft_journal", "raft_logging", "raft_secret", "raft_store",
           "raft_transport", "remoting", "scans", "server", "state_machine",
           "store_identity"]
