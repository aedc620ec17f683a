"""Which controller group a controller's Raft files belong to: ``<controllerStorePath>/raft/group.json``.

A controller started on another group's Raft files loads that group's state, serves its broker groups in
the console and in routes, and offers its log to the peers it is configured with, where a log of a later
term could even win an election and replace theirs. So the files carry their group's identity, and a node
refuses to start on files that are not its group's, before it touches any of them:

* ``group``, ``peers`` and ``selfId`` (``controllerDLegerGroup``, ``controllerDLegerPeers`` as this node
  reads them, ``controllerDLegerSelfId``): written when the store is first used, compared at every start.
* ``clusterId``: 128 random bits made once per group. The first leader that finds none in the replicated
  state commits one through Raft (its first barrier carries it, the first one committed wins), so every
  node of the group holds the same id; each node then copies it into its stamp (:class:`StoreStamp`). At
  start, a node whose stamp holds an id asks its peers for theirs (``GET /v1/controller/metadata``) before
  Raft opens the files: a peer that answers another id belongs to another group. That tells apart groups
  configured exactly alike (the same name and addresses, on other hosts, or one after the other).

Files from before the stamp existed are stamped from the configuration at their first start (with a
warning); their id comes with the next leader. The stamp lives beside the Raft files, so moving ``raft/``
aside (the recovery for damaged files) takes it along, and the node starts as a new member.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from services.common.durable import atomic_write
from services.common.errors import ConfigError
from services.controller.config import ControllerConfig
from services.controller.raft_store import DUMP, JOURNAL, META

__all__ = ["IDENTITY_FILE", "ForeignStateError", "StoreIdentity", "StoreStamp", "differences", "identity_of",
           "keep_stamp", "new_cluster_id", "open_stamp", "peer_verdict", "valid_cluster_id"]

log = logging.getLogger(__name__)

IDENTITY_FILE = "group.json"
FORMAT = 1
#: The section of docs/operations.md every refusal points at.
RECOVERY = "docs/operations.md, 'Controller store of another group'"
_CLUSTER_ID = re.compile(r"[0-9a-f]{32}")
#: A stamp larger than this is not one (and is not read whole).
MAX_BYTES = 1 << 20


def new_cluster_id() -> str:
    return uuid.uuid4().hex


def valid_cluster_id(value: object) -> bool:
    return isinstance(value, str) and bool(_CLUSTER_ID.fullmatch(value))


@dataclass(frozen=True)
class StoreIdentity:
    group: str
    peers: tuple[str, ...]  # id-host:port@raftPort, sorted
    self_id: str
    cluster_id: str = ""  # "" until this node has learnt its group's id

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "group": self.group, "peers": list(self.peers), "selfId": self.self_id,
                           "clusterId": self.cluster_id}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> StoreIdentity:
        """Raises ValueError naming what is wrong."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a format {FORMAT} stamp")
        group, peers, self_id = data.get("group"), data.get("peers"), data.get("selfId")
        cluster_id = data.get("clusterId", "")
        if not (isinstance(group, str) and isinstance(self_id, str) and isinstance(peers, list)
                and all(isinstance(p, str) for p in peers)):
            raise ValueError("group, peers or selfId missing or of the wrong type")
        if cluster_id != "" and not valid_cluster_id(cluster_id):
            raise ValueError("clusterId is not 32 lower-case hex digits")
        return cls(group, tuple(peers), self_id, cluster_id)


def identity_of(config: ControllerConfig) -> StoreIdentity:
    """The identity this node's configuration gives its store (no cluster id: that comes from the group)."""
    peers = tuple(sorted(f"{p.id}-{p.host}:{p.port}@{p.raft_port}" for p in config.peers()))
    return StoreIdentity(config.controllerDLegerGroup, peers, config.controllerDLegerSelfId)


def differences(stamped: StoreIdentity, configured: StoreIdentity) -> list[str]:
    """What the stamp says that the configuration does not, one phrase each."""
    found = []
    if stamped.group != configured.group:
        found.append(f"group {stamped.group!r} (this node is configured for {configured.group!r})")
    if stamped.peers != configured.peers:
        found.append(f"peers {';'.join(stamped.peers)} (this node is configured with {';'.join(configured.peers)})")
    if stamped.self_id != configured.self_id:
        found.append(f"node {stamped.self_id!r} (this node is {configured.self_id!r})")
    return found


def open_stamp(raft_dir: Path, configured: StoreIdentity) -> tuple[StoreIdentity, str | None]:
    """The store's stamp, checked against ``configured`` (a ConfigError if it is another group's); a store
    without one is stamped now. Also what to log about it, if anything (logging may not be set up yet)."""
    path = raft_dir / IDENTITY_FILE
    if not path.exists() and not path.is_symlink():
        older = [name for name in (JOURNAL, META, DUMP) if (raft_dir / name).exists()]
        _write(path, configured)
        if not older:
            return configured, None
        return configured, (f"{path}: the Raft files had no stamp (written before this version, or the stamp was "
                            f"removed); stamped them for group {configured.group!r}, peers "
                            f"{';'.join(configured.peers)}, node {configured.self_id!r}")
    stamped = _read(path)
    found = differences(stamped, configured)
    if found:
        raise ConfigError(f"the controller store {raft_dir.parent} belongs to another controller group: its Raft "
                          f"files are stamped ({path}) for {'; '.join(found)}. Point controllerStorePath at this "
                          f"node's own store; if the configuration was changed on purpose, see {RECOVERY}")
    return stamped, None


def _read(path: Path) -> StoreIdentity:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        return StoreIdentity.from_json(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"the controller store's stamp {path} cannot be read ({exc}); it says which controller "
                          f"group the Raft files beside it belong to. See {RECOVERY}") from None


def _write(path: Path, identity: StoreIdentity) -> None:
    try:
        atomic_write(path, identity.to_json(), mode=0o644)
    except OSError as exc:
        raise ConfigError(f"cannot write the controller store's stamp {path}: {exc.strerror or exc}; "
                          "controllerStorePath must be a directory this user can write") from None


def peer_verdict(stamped: StoreIdentity, store: Path, answers: Mapping[str, tuple[str, str | None]]) -> str | None:
    """Why this store is not the group's, judging by what its peers answered (peer id -> (address, their
    cluster id or None when unknown or unreachable)); None when nothing says so."""
    if not stamped.cluster_id:
        return None
    for peer_id, (address, theirs) in sorted(answers.items()):
        if theirs is not None and theirs != stamped.cluster_id:
            return (f"the controller store {store} belongs to controller cluster {stamped.cluster_id}, but peer "
                    f"{peer_id} ({address}) answers for controller cluster {theirs}: these Raft files are another "
                    "group's, configured like this one. Point controllerStorePath at this node's own store; if this "
                    f"node is to join the running group afresh, move {store / 'raft'} aside first (see {RECOVERY})")
    return None


class ForeignStateError(ConfigError):
    """This node's applied state names another group's cluster id than its stamp."""


class StoreStamp:
    """This node's stamp, kept in step with the cluster id its Raft state holds."""

    def __init__(self, raft_dir: Path, identity: StoreIdentity) -> None:
        self.path = raft_dir / IDENTITY_FILE
        self.identity = identity

    def record(self, cluster_id: str | None) -> None:
        """Stamp the group's id once the state holds one. Raises ForeignStateError if the state holds another id
        than the stamp (this node's Raft log is now another group's), ConfigError if the stamp cannot be written."""
        if not cluster_id or cluster_id == self.identity.cluster_id:
            return
        if self.identity.cluster_id:
            raise ForeignStateError(f"this node's Raft state now belongs to controller cluster {cluster_id}, but its "
                                    f"store was stamped for cluster {self.identity.cluster_id} ({self.path}): it "
                                    f"was joined to another group. It stops; see {RECOVERY}")
        identity = replace(self.identity, cluster_id=cluster_id)
        _write(self.path, identity)
        self.identity = identity
        log.info("controller cluster id %s stamped on %s", cluster_id, self.path)


async def keep_stamp(stamp: StoreStamp, cluster_id: Callable[[], str | None], on_foreign: Callable[[str], None],
                     interval_s: float = 1.0) -> None:
    """Copy the replicated cluster id into the stamp as soon as this node has applied it; when the state names
    another group's id, say so through ``on_foreign`` (the node must stop) and end."""
    while True:
        try:
            stamp.record(cluster_id())
        except ForeignStateError as exc:
            on_foreign(exc.remark)
            return
        except ConfigError as exc:  # a full or failing disk: the next round tries again
            log.warning("%s", exc.remark)
        await asyncio.sleep(interval_s)
