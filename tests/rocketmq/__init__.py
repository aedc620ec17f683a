"""A test kit for real Apache RocketMQ 5 in controller mode, beside mqctl.

It resolves RocketMQ's jars from Maven Central into a cache (fetch.py), starts real name servers,
DLedger controller groups and controller-mode brokers with small heaps and the flags Java 17 needs,
each in its own folder (servers.py, cluster.py), waits on them by asking over RocketMQ's remoting
protocol (probe.py), runs the real ``mqadmin``, and stops everything it started. By hand:
``python -m tests.rocketmq fetch|up|status|mqadmin ...|down`` (docs/operations.md, "mqctl beside RocketMQ").

Versions: the pinned one is 5.3.3 and the second leg 5.5.0, the newest releases whose every module
Maven Central serves here (5.3.4's and 5.5.1's srvutil, remoting, common, client and tools are not).
"""

from __future__ import annotations

import os

from tests.rocketmq.cluster import RocketMQCluster, leftover_pids, mqadmin, running
from tests.rocketmq.errors import ArtifactUnavailable, KitError, NotReady, ProcessExited, ToolMissing
from tests.rocketmq.fetch import RocketMQ
from tests.rocketmq.servers import Broker, ControllerGroup, NameServer, Runtime

#: The version the kit pins, and the second leg (remoting JSON by fastjson2 from 5.4.0 on).
PINNED = "5.3.3"
SECOND = "5.5.0"
VERSIONS = (PINNED, SECOND)
#: The versions the broker and client scenarios run against (the Java clients' failover, mixed clusters, the
#: consumers' life cycle, retries, transactions): the pinned one, as the controller and admin tests run on
#: both legs; MQCTL_ROCKETMQ_ALL_VERSIONS=1 runs the scenarios on both too (about eight minutes more).
SCENARIO_VERSIONS = VERSIONS if os.environ.get("MQCTL_ROCKETMQ_ALL_VERSIONS") == "1" else (PINNED,)

__all__ = [
    "PINNED",
    "SCENARIO_VERSIONS",
    "SECOND",
    "VERSIONS",
    "ArtifactUnavailable",
    "Broker",
    "ControllerGroup",
    "KitError",
    "NameServer",
    "NotReady",
    "ProcessExited",
    "RocketMQ",
    "RocketMQCluster",
    "Runtime",
    "ToolMissing",
    "leftover_pids",
    "mqadmin",
    "running",
]
