"""Broker keys in the state machine: a key is bound to a broker id once (at apply, or by the first
registration that brings one) and never replaced; everyone may read them (they are public keys)."""

from __future__ import annotations

import pickle

from services.broker.ha.auth import BrokerKey
from services.common.codes import ResponseCode as RC
from services.controller.events import ApplyBrokerIdEvent, UpdateBrokerAddressEvent, event_from_dict
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import BROKER, CLUSTER, IPS, all_alive, check_code, run

KEY_A, KEY_B = "a" * 64, "b" * 64


def keys_of(m: ReplicasInfoManager) -> dict[int, str]:
    result = m.broker_keys(BROKER)
    assert result.ok
    assert result.data is not None
    return {k["brokerId"]: k["publicKey"] for k in result.data["keys"]}


def applied(m: ReplicasInfoManager, broker_id: int, key: str, addr: str = IPS[0]) -> int:
    return run(m, lambda mm: mm.apply_broker_id(CLUSTER, BROKER, broker_id, check_code(addr), key)).code


def test_apply_binds_the_key_and_a_retry_must_bring_the_same_key() -> None:
    m = ReplicasInfoManager()
    assert applied(m, 1, KEY_A) == RC.SUCCESS
    assert keys_of(m) == {1: KEY_A}
    assert applied(m, 1, KEY_A) == RC.SUCCESS  # the same apply, retried after a lost answer
    # The check code is no secret (it is an address and a time): with another key the retry is refused.
    assert applied(m, 1, KEY_B) == RC.CONTROLLER_BROKER_ID_INVALID
    assert applied(m, 1, "") == RC.CONTROLLER_BROKER_ID_INVALID
    assert keys_of(m) == {1: KEY_A}


def test_registration_sets_a_missing_key_once_and_refuses_another() -> None:
    m = ReplicasInfoManager()
    assert applied(m, 1, "") == RC.SUCCESS  # a broker from before keys existed
    assert keys_of(m) == {1: ""}
    first = run(m, lambda mm: mm.register_broker(CLUSTER, BROKER, 1, IPS[0], all_alive, KEY_A))
    assert first.ok and first.events == (UpdateBrokerAddressEvent(CLUSTER, BROKER, IPS[0], 1, KEY_A),)
    assert keys_of(m) == {1: KEY_A}
    again = run(m, lambda mm: mm.register_broker(CLUSTER, BROKER, 1, IPS[0], all_alive, KEY_A))
    assert again.ok and again.events == ()
    other = run(m, lambda mm: mm.register_broker(CLUSTER, BROKER, 1, IPS[1], all_alive, KEY_B))
    assert other.code == RC.CONTROLLER_BROKER_ID_INVALID and other.events == ()
    # A registration without a key (a RocketMQ broker, an older mqctl) changes the address only.
    moved = run(m, lambda mm: mm.register_broker(CLUSTER, BROKER, 1, IPS[1], all_alive))
    assert moved.ok
    assert keys_of(m) == {1: KEY_A}


def test_an_address_update_never_replaces_a_key() -> None:
    m = ReplicasInfoManager()
    applied(m, 1, KEY_A)
    m.apply_event(UpdateBrokerAddressEvent(CLUSTER, BROKER, IPS[2], 1, KEY_B))
    assert keys_of(m) == {1: KEY_A}


def test_keys_survive_snapshots_and_older_snapshots_still_load() -> None:
    m = ReplicasInfoManager()
    applied(m, 1, KEY_A)
    applied(m, 2, KEY_B, IPS[1])
    restored = pickle.loads(pickle.dumps(m))
    assert keys_of(restored) == {1: KEY_A, 2: KEY_B}
    old = m.to_dict()
    for bs in old["brokerSets"]:
        bs["brokers"] = {k: v[:2] for k, v in bs["brokers"].items()}  # a snapshot written before keys
    older = ReplicasInfoManager()
    older.load_dict(old)
    assert keys_of(older) == {1: "", 2: ""}


def test_events_round_trip_with_and_without_keys() -> None:
    event = ApplyBrokerIdEvent(CLUSTER, BROKER, IPS[0], 1, check_code(IPS[0]), KEY_A)
    assert event_from_dict(event.to_dict()) == event
    legacy = {k: v for k, v in event.to_dict().items() if k != "publicKey"}  # a log entry from before keys
    assert event_from_dict(legacy).publicKey == ""


def test_keys_of_an_unknown_group() -> None:
    assert ReplicasInfoManager().broker_keys("nope").code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


# ------------------------------------------------------------------ only the master alters its SyncStateSet


def keyed_group(master_key: BrokerKey) -> ReplicasInfoManager:
    """broker 1 (master, with ``master_key``) and broker 2, both alive; masterEpoch 1, set {1}, set epoch 1."""
    from services.controller.elect_policy import DefaultElectPolicy
    from services.controller.state_machine import ElectMasterRequest

    m = ReplicasInfoManager()
    applied(m, 1, master_key.public_hex)
    applied(m, 2, KEY_B, IPS[1])
    run(m, lambda mm: mm.elect_master(ElectMasterRequest(CLUSTER, BROKER, 1), DefaultElectPolicy(all_alive, None),
                                      False, all_alive))
    return m


def alter(m: ReplicasInfoManager, signature: str, members: tuple[int, ...] = (1, 2), epoch: int = 1) -> int:
    return run(m, lambda mm: mm.alter_sync_state_set(BROKER, 1, 1, members, epoch, all_alive, signature)).code


def test_an_alter_for_a_master_with_a_key_must_be_signed_by_it() -> None:
    key = BrokerKey.generate()
    m = keyed_group(key)
    assert alter(m, "") == RC.NO_PERMISSION                        # anyone who can reach the controller
    assert alter(m, BrokerKey.generate().sign_alter(BROKER, 1, 1, [1, 2], 1)) == RC.NO_PERMISSION
    assert alter(m, key.sign_alter(BROKER, 1, 1, [1], 1), (1, 2)) == RC.NO_PERMISSION  # signed another set
    good = key.sign_alter(BROKER, 1, 1, [1, 2], 1)
    assert alter(m, good) == RC.SUCCESS
    # Replayed after it committed: the set epoch it names is gone.
    assert alter(m, good, (1,), epoch=1) != RC.SUCCESS
    assert m.broker_sets[BROKER].syncStateSet == {1, 2}


def test_a_master_without_a_key_alters_unsigned_as_in_rocketmq() -> None:
    from services.controller.elect_policy import DefaultElectPolicy
    from services.controller.state_machine import ElectMasterRequest

    m = ReplicasInfoManager()
    applied(m, 1, "")
    applied(m, 2, "", IPS[1])
    run(m, lambda mm: mm.elect_master(ElectMasterRequest(CLUSTER, BROKER, 1), DefaultElectPolicy(all_alive, None),
                                      False, all_alive))
    assert alter(m, "") == RC.SUCCESS
