"""What servers and clients share: addresses, wire clients, errors, limits, durable files.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["addresses", "answers", "auth", "bodylimit", "broker_client", "clock", "codes", "conncap",
           "controller_client", "durable", "entry", "envelope", "errors", "faults", "fields", "hostguard",
           "httpguard", "httplimits", "httpserver", "logsetup", "metrics", "namesrv_client", "offload", "ports", "props",
           "remoting_admin", "remoting_blocking", "remoting_client", "remoting_conn", "rocketmq_properties", "signing", "sniff",
           "tasks", "text", "tls", "tool_consumer", "wire"]
