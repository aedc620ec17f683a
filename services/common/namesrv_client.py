"""Finding brokers through a name server, as mqadmin's ``-n`` does: ``GET_BROKER_CLUSTER_INFO`` (106) over
remoting, to a RocketMQ name server or to our controllers (which serve it).

The answer becomes the same broker-set views the controller gives (``broker_client.broker_sets``), with
what a name server knows: each group's addresses by broker id, id 0 the master. It does not know the
SyncStateSet, so every replica is listed as not in sync and alive (a name server drops a broker whose
heartbeats stop).
"""

from __future__ import annotations

import time
from typing import Any, Self

from services.common.addresses import split_address
from services.common.errors import AddressError, MqctlError, UnreachableError, UsageError
from services.common.remoting_admin import cluster_info
from services.common.remoting_blocking import BlockingRemoting
from services.remoting import bodies
from services.remoting.command import RemotingCommand
from services.remoting.errors import RemotingError

__all__ = ["MASTER_ID", "NameServerClient", "broker_sets_of"]

#: RocketMQ's MixAll.MASTER_ID: the id a name server lists a group's master under.
MASTER_ID = 0


class NameServerClient:
    def __init__(self, addresses: list[str], timeout: float = 5.0) -> None:
        self.addresses = list(addresses)
        self.timeout = timeout
        self._remoting = BlockingRemoting()

    def close(self) -> None:
        self._remoting.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cluster_info(self) -> bodies.ClusterInfo:
        """From the first name server that answers."""
        unreachable = []
        for address in self.addresses:
            try:
                host, port = split_address(address, lenient=True)
            except ValueError as exc:
                raise AddressError(f"bad name server address {address!r}: {exc}") from None
            deadline = time.monotonic() + self.timeout

            def call(request: RemotingCommand, host: str = host, port: int = port,
                     deadline: float = deadline) -> RemotingCommand:
                return self._remoting.call(host, port, request, deadline)

            try:
                return cluster_info(call)
            except UnreachableError:
                unreachable.append(address)
            except RemotingError as exc:
                raise MqctlError(f"name server {address} answered a malformed cluster info: {exc}") from None
        raise UnreachableError(f"no name server reachable at {';'.join(self.addresses)}", unreachable)

    def broker_sets(self, broker_name: str | None, cluster: str | None) -> list[dict[str, Any]]:
        return broker_sets_of(self.cluster_info(), broker_name, cluster)


def broker_sets_of(info: bodies.ClusterInfo, broker_name: str | None, cluster: str | None) -> list[dict[str, Any]]:
    """The broker-set views of ``broker_name``, or of every group of ``cluster``."""
    if not broker_name and not cluster:
        raise UsageError("give -b brokerName or -c clusterName")
    names = [broker_name] if broker_name else sorted(info.cluster_addr_table.get(str(cluster), frozenset()))
    found = [_view(info.broker_addr_table[name]) for name in names if name in info.broker_addr_table]
    if not found:
        what = f"broker-set {broker_name}" if broker_name else f"cluster {cluster}"
        raise UsageError(f"{what} is not known to the name server")
    return found


def _view(data: bodies.BrokerData) -> dict[str, Any]:
    addrs = dict(sorted(data.broker_addrs.items()))
    return {"clusterName": data.cluster, "brokerName": data.broker_name,
            "masterBrokerId": MASTER_ID if MASTER_ID in addrs else None, "masterAddress": addrs.get(MASTER_ID),
            "masterEpoch": None, "syncStateSetEpoch": None, "inSyncReplicas": [],
            "notInSyncReplicas": [{"brokerName": data.broker_name, "brokerId": i, "brokerAddress": a, "alive": True}
                                  for i, a in addrs.items()]}
