"""The broker: store, controller mode, replication, HTTP and remoting APIs.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["api", "broker", "channel", "cli", "commitlog", "config", "connections", "consume_queue", "consumer_offsets",
           "consumers", "contract", "controller_api", "controller_remoting", "epoch_file", "flush", "ha", "identity", "key_index", "metrics",
           "namesrv_registration", "processor", "put_batcher", "quorum", "rebalance_lock", "record", "remoting", "remoting_messages",
           "remoting_pull", "replicas_manager", "replication", "retention", "runtime_info", "schedule", "server", "slave_sync", "stats", "store", "store_check", "subscription_groups", "sync_state", "time_search",
           "topic_rules", "topics", "transaction"]
