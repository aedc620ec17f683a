"""The controller's HTTP contract (services/controller/contract.py) against what the server really answers:
every answer the state machine gives for the routes a client reads validates against the response model the
broker's client checks it with, and the request models survive a JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path

from services.controller import contract
from services.controller.config import ControllerConfig
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import BROKER, CLUSTER, IPS, all_alive, check_code, run


def group_of_three() -> ReplicasInfoManager:
    m = ReplicasInfoManager()
    for i in (1, 2, 3):
        run(m, lambda mm, i=i: mm.apply_broker_id(CLUSTER, BROKER, i, check_code(IPS[i - 1])))
    return m


def test_every_answer_a_client_reads_fits_its_model() -> None:
    from services.controller.elect_policy import DefaultElectPolicy
    from services.controller.state_machine import ElectMasterRequest

    m = group_of_three()
    nxt = m.get_next_broker_id(CLUSTER, BROKER).data
    assert contract.NextBrokerId.model_validate(nxt).nextBrokerId == 4
    registered = run(m, lambda mm: mm.register_broker(CLUSTER, BROKER, 1, IPS[0], all_alive)).data
    assert contract.MasterView.model_validate(registered).masterBrokerId is None
    elected = run(m, lambda mm: mm.elect_master(ElectMasterRequest(CLUSTER, BROKER, 1), DefaultElectPolicy(),
                                                 False, all_alive)).data
    view = contract.MasterView.model_validate(elected)
    assert (view.masterBrokerId, view.masterEpoch, view.syncStateSet) == (1, 1, [1])
    altered = run(m, lambda mm: mm.alter_sync_state_set(BROKER, 1, 1, [1, 2], 1, all_alive)).data
    assert contract.AlterResult.model_validate(altered).newSyncStateSetEpoch == 2
    info = contract.MasterView.model_validate(m.get_replica_info(BROKER).data)
    assert (info.masterAddress, info.syncStateSet, info.syncStateSetEpoch) == (IPS[0], [1, 2], 2)
    data = contract.SyncStateData.model_validate(m.get_sync_state_data([BROKER], all_alive).data)
    assert [r.brokerId for r in data.brokers[0].inSyncReplicas] == [1, 2]
    assert [r.brokerId for r in data.brokers[0].notInSyncReplicas] == [3]
    keys = contract.BrokerKeys.model_validate(m.broker_keys(BROKER).data)
    assert [k.brokerId for k in keys.keys] == [1, 2, 3]
    elected_view = contract.Elected.model_validate(elected)
    assert list(elected_view.shown()) == list(elected)  # a view is shown as it was served
    page = contract.EventsPage.model_validate({"events": m.events_page(0, 100), "nextIndex": m.next_event_index,
                                               "latestIndex": m.next_event_index - 1})
    assert [e["eventType"] for e in page.events][:1] == ["APPLY_BROKER_ID"]


def test_every_node_view_fits_its_model(tmp_path: Path) -> None:
    config = ControllerConfig(controllerStorePath=str(tmp_path / "store"))
    served = contract.ControllerConfig.model_validate({"config": config.as_properties()}).config
    assert served["controllerStorePath"] == str(tmp_path / "store")


def test_request_models_survive_a_json_round_trip() -> None:
    requests = [
        contract.ApplyBrokerIdRequest(clusterName="c", brokerName="b", appliedBrokerId=2, registerCheckCode="x;1",
                                      publicKey="ab" * 32),
        contract.RegisterBrokerRequest(clusterName="c", brokerName="b", brokerId=2, brokerAddress="h:1"),
        contract.HeartbeatRequest(clusterName="c", brokerName="b", brokerAddr="h:1", brokerId=2, epoch=3,
                                  maxOffset=10, incarnation=7),
        contract.AlterSyncStateSetRequest(brokerName="b", masterBrokerId=1, masterEpoch=2, newSyncStateSet=[1, 2],
                                          syncStateSetEpoch=3, signature="cd" * 64),
        contract.ElectMasterBody(brokerName="b", brokerId=2, designateElect=True),
        contract.CleanBrokerDataRequest(brokerName="b", brokerControllerIdsToClean="1;2"),
    ]
    for request in requests:
        again = type(request).model_validate(json.loads(request.model_dump_json()))
        assert again == request


def test_the_protected_paths_are_routes_of_the_contract() -> None:
    routes = {v for k, v in vars(contract).items() if k.isupper() and isinstance(v, str) and v.startswith("/v1/")}
    assert routes >= contract.PROTECTED_PATHS
    assert contract.route(contract.SYNC_STATE_DATA) == "/syncStateData"
