"""The stamp on a controller's Raft files (services/controller/store_identity.py): what it holds, when a store
is refused, how the group's cluster id is agreed through the Raft log and copied into each node's stamp."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar, cast

import pytest

from services.common.errors import ConfigError
from services.controller import server
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.events import encode_identity, encode_noop
from services.controller.raft import RaftNode, _apply_entry
from services.controller.state_machine import ReplicasInfoManager
from services.controller.store_identity import (
    IDENTITY_FILE,
    StoreIdentity,
    StoreStamp,
    differences,
    identity_of,
    keep_stamp,
    new_cluster_id,
    open_stamp,
    peer_verdict,
    valid_cluster_id,
)

PEERS = "n1-10.0.0.2:9878;n0-10.0.0.1:9878;n2-10.0.0.3:9878@9900"
ID_A, ID_B = "a" * 32, "b" * 32
T = TypeVar("T")


def config(tmp_path: Path, **props: str) -> ControllerConfig:
    return ControllerConfig(controllerDLegerPeers=PEERS, controllerDLegerSelfId="n1",
                            controllerStorePath=str(tmp_path / "store"), controllerRaftPassword="pw", **props)


def test_the_identity_is_the_group_its_peers_sorted_with_both_ports_and_the_node(tmp_path: Path) -> None:
    identity = identity_of(config(tmp_path))
    assert identity == StoreIdentity("DefaultControllerGroup", (
        "n0-10.0.0.1:9878@9879", "n1-10.0.0.2:9878@9879", "n2-10.0.0.3:9878@9900"), "n1", "")
    assert StoreIdentity.from_json(identity.to_json()) == identity
    with_id = replace(identity, cluster_id=new_cluster_id())
    assert StoreIdentity.from_json(with_id.to_json()) == with_id and valid_cluster_id(with_id.cluster_id)


@pytest.mark.parametrize("text", ["[]", '{"format": 2}', '{"format": 1, "group": "g", "peers": "x", "selfId": "n0"}',
                                  '{"format": 1, "group": "g", "peers": [], "selfId": "n0", "clusterId": "XYZ"}'])
def test_a_malformed_stamp_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        StoreIdentity.from_json(text)


def test_a_new_store_is_stamped_silently_and_read_back_the_next_time(tmp_path: Path) -> None:
    raft_dir, configured = tmp_path / "store" / "raft", identity_of(config(tmp_path))
    assert open_stamp(raft_dir, configured) == (configured, None)
    assert json.loads((raft_dir / IDENTITY_FILE).read_text())["peers"] == list(configured.peers)
    assert open_stamp(raft_dir, configured) == (configured, None)


def test_raft_files_without_a_stamp_are_stamped_with_a_note_for_the_log(tmp_path: Path) -> None:
    raft_dir, configured = tmp_path / "raft", identity_of(config(tmp_path))
    raft_dir.mkdir()
    (raft_dir / "raft.journal").write_bytes(b"older version")
    stamped, note = open_stamp(raft_dir, configured)
    assert stamped == configured and note is not None and "had no stamp" in note
    assert StoreIdentity.from_json((raft_dir / IDENTITY_FILE).read_text()) == configured


@pytest.mark.parametrize(("change", "named"), [
    ({"controllerDLegerGroup": "OtherGroup"}, "group 'DefaultControllerGroup' (this node is configured for 'OtherGroup')"),
    ({"controllerDLegerPeers": "n0-10.0.0.1:9878;n1-10.0.0.2:9878"}, "peers n0-10.0.0.1:9878@9879;n1-10.0.0.2"),
    ({"controllerDLegerSelfId": "n0"}, "node 'n1' (this node is 'n0')"),
])
def test_a_store_stamped_for_another_group_is_refused_naming_the_difference_and_the_way_out(
        tmp_path: Path, change: dict[str, str], named: str) -> None:
    raft_dir = tmp_path / "store" / "raft"
    open_stamp(raft_dir, identity_of(config(tmp_path)))
    before = (raft_dir / IDENTITY_FILE).read_bytes()
    other = replace(config(tmp_path), **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as refused:
        open_stamp(raft_dir, identity_of(other))
    assert "belongs to another controller group" in refused.value.remark and named in refused.value.remark
    assert "Controller store of another group" in refused.value.remark
    assert (raft_dir / IDENTITY_FILE).read_bytes() == before  # nothing rewritten


def test_differences_is_empty_for_the_same_identity_whatever_the_cluster_id(tmp_path: Path) -> None:
    identity = identity_of(config(tmp_path))
    assert differences(replace(identity, cluster_id=ID_A), identity) == []


def test_a_damaged_stamp_stops_the_node_naming_the_file(tmp_path: Path) -> None:
    raft_dir = tmp_path / "raft"
    raft_dir.mkdir()
    (raft_dir / IDENTITY_FILE).write_bytes(b"\xff garbage")
    with pytest.raises(ConfigError, match="group.json cannot be read"):
        open_stamp(raft_dir, identity_of(config(tmp_path)))


def test_the_stamp_takes_the_groups_id_once_and_refuses_another(tmp_path: Path) -> None:
    raft_dir = tmp_path / "raft"
    identity, _ = open_stamp(raft_dir, identity_of(config(tmp_path)))
    stamp = StoreStamp(raft_dir, identity)
    stamp.record(None)
    assert stamp.identity.cluster_id == ""
    stamp.record(ID_A)
    stamp.record(ID_A)
    assert StoreIdentity.from_json((raft_dir / IDENTITY_FILE).read_text()).cluster_id == ID_A
    with pytest.raises(ConfigError, match=f"now belongs to controller cluster {ID_B}"):
        stamp.record(ID_B)
    assert open_stamp(raft_dir, identity_of(config(tmp_path)))[0].cluster_id == ID_A


def test_keeping_the_stamp_reports_a_foreign_state_and_ends(tmp_path: Path) -> None:
    stamp = StoreStamp(tmp_path, replace(identity_of(config(tmp_path)), cluster_id=ID_A))
    reasons: list[str] = []
    asyncio.run(asyncio.wait_for(keep_stamp(stamp, lambda: ID_B, reasons.append, interval_s=0), 5))
    assert len(reasons) == 1 and ID_B in reasons[0]


def test_peers_that_answer_another_cluster_id_refuse_the_store(tmp_path: Path) -> None:
    stamped = replace(identity_of(config(tmp_path)), cluster_id=ID_A)
    store = tmp_path / "store"
    assert peer_verdict(stamped, store, {"n0": ("10.0.0.1:9878", ID_A), "n2": ("10.0.0.3:9878", None)}) is None
    assert peer_verdict(replace(stamped, cluster_id=""), store, {"n0": ("10.0.0.1:9878", ID_B)}) is None
    verdict = peer_verdict(stamped, store, {"n0": ("10.0.0.1:9878", None), "n2": ("10.0.0.3:9878", ID_B)})
    assert verdict is not None and f"peer n2 (10.0.0.3:9878) answers for controller cluster {ID_B}" in verdict
    assert str(store / "raft") in verdict


def test_the_start_up_check_asks_the_peers_only_once_the_store_has_an_id(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    answer = {"10.0.0.1:9878": ID_B, "10.0.0.3:9878": None}
    monkeypatch.setattr(server, "_peer_cluster_id", lambda address: asked.append(address) or answer[address])
    cfg = config(tmp_path)
    server.check_store(cfg)  # a new store: nothing to compare yet
    assert asked == []
    StoreStamp(cfg.store_dir / "raft", identity_of(cfg)).record(ID_A)
    with pytest.raises(ConfigError, match="answers for controller cluster"):
        server.check_store(cfg)
    assert sorted(asked) == ["10.0.0.1:9878", "10.0.0.3:9878"]  # never itself
    answer["10.0.0.1:9878"] = ID_A
    assert server.check_store(cfg)[0].cluster_id == ID_A


# ---------------------------------------------------------------------- the id in the replicated state
def test_the_first_identity_entry_committed_names_the_group_and_later_ones_are_ignored() -> None:
    manager = ReplicasInfoManager()
    assert _apply_entry(manager, encode_noop("r0")) == {"ok": True}
    assert manager.cluster_id is None
    for entry in (encode_identity("not-an-id", "r1"), encode_identity(ID_A, "r2"), encode_identity(ID_B, "r3")):
        assert _apply_entry(manager, entry) == {"ok": True}
    assert manager.cluster_id == ID_A
    assert manager.seen_request("r3")  # an identity entry is de-duplicated like any write


def test_the_cluster_id_survives_a_snapshot_and_an_older_snapshot_has_none() -> None:
    manager = ReplicasInfoManager()
    manager.adopt_cluster_id(ID_A)
    assert pickle.loads(pickle.dumps(manager)).cluster_id == ID_A
    older = {k: v for k, v in manager.to_dict().items() if k != "clusterId"}
    copy = ReplicasInfoManager()
    copy.load_dict(older)
    assert copy.cluster_id is None and "clusterId" not in copy.to_dict()


class LeaderRaft:
    """What ControllerManager._take_office uses of the Raft node: a leader whose barriers commit at once."""

    def __init__(self, cluster_id: str | None) -> None:
        self.manager = ReplicasInfoManager()
        self.manager.adopt_cluster_id(cluster_id)
        self.proposed: list[str | None] = []

    def is_leader(self) -> bool:
        return True

    def journal_fault(self) -> str | None:
        return None  # the journal writes

    def read(self, fn: Callable[[ReplicasInfoManager], T]) -> T:
        return fn(self.manager)

    async def barrier(self, timeout_s: float, cluster_id: str | None = None) -> None:
        self.proposed.append(cluster_id)
        _apply_entry(self.manager, encode_identity(cluster_id, new_cluster_id()) if cluster_id
                     else encode_noop(new_cluster_id()))


@pytest.mark.parametrize("known", [None, ID_A])
def test_a_new_leader_proposes_an_id_only_when_the_state_has_none(tmp_path: Path, known: str | None) -> None:
    raft = LeaderRaft(known)
    manager = ControllerManager(config(tmp_path), raft=cast(RaftNode, raft))
    asyncio.run(manager._take_office())
    assert manager.serving
    assert (raft.proposed[0] is None) == (known is not None)
    assert raft.manager.cluster_id == (known or raft.proposed[0]) and manager.cluster_id() == raft.manager.cluster_id
