"""RocketMQ's own broker configuration files start an mqctl broker: what we implement is read (including
``storePathCommitLog`` and ``haListenPort`` defaulting to ``listenPort + 1``), what controller mode decides
itself is ignored with a warning, what RocketMQ defines but we do not use is ignored with a warning that
says why, and an unknown name is a warning too unless ``strictConfig=true``. The files carry the
properties of those under RocketMQ's distribution/conf/ that a controller-mode broker may be given
(written here, not copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.config import config_from_properties
from services.broker.server import build_config
from services.common.errors import ConfigError

FILES = {
    # controller/quick-start/broker-n0.conf
    "quick-start-n0": ("brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = -1\n"
                       "brokerRole = SLAVE\ndeleteWhen = 04\nfileReservedTime = 48\nenableControllerMode = true\n"
                       "controllerAddr = 127.0.0.1:9878\nnamesrvAddr = 127.0.0.1:9876\nallAckInSyncStateSet=true\n"
                       "listenPort=30911\nstorePathRootDir={root}\nstorePathCommitLog={root}/commitlog\n"),
    # controller/quick-start/broker-n1.conf
    "quick-start-n1": ("brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = -1\n"
                       "brokerRole = SLAVE\ndeleteWhen = 04\nfileReservedTime = 48\nenableControllerMode = true\n"
                       "controllerAddr = 127.0.0.1:9878\nnamesrvAddr = 127.0.0.1:9876\nallAckInSyncStateSet=true\n"
                       "listenPort=31911\nstorePathRootDir={root}\nstorePathCommitLog={root}/log\n"),
    # 2m-2s-sync/broker-a.properties, given a controller
    "2m-2s-sync": ("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\ndeleteWhen=04\n"
                   "fileReservedTime=48\nbrokerRole=SYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n"
                   "controllerAddr=127.0.0.1:9878\nstorePathRootDir={root}\n"),
    # broker.conf, given a controller
    "broker.conf": ("brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\ndeleteWhen = 04\n"
                    "fileReservedTime = 48\nbrokerRole = ASYNC_MASTER\nflushDiskType = ASYNC_FLUSH\n"
                    "controllerAddr = 127.0.0.1:9878\nstorePathRootDir={root}\n"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_rocketmqs_broker_files_are_read(tmp_path: Path, name: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(FILES[name].replace("{root}", str(tmp_path / "store")))
    warnings: list[str] = []
    config = build_config(str(conf), {}, warnings)
    assert (config.brokerClusterName, config.brokerName, config.controllerAddr) == (
        "DefaultCluster", "broker-a", "127.0.0.1:9878")
    assert config.store_dir == tmp_path / "store"
    for decided in ("brokerId", "brokerRole"):
        assert any(w.startswith(f"{decided}=") and "IGNORED in controller mode" in w for w in warnings), warnings
    assert (config.deleteWhen, config.fileReservedTime) == ("04", 48)  # retention honours them
    assert not any("deleteWhen" in w or "fileReservedTime" in w for w in warnings), warnings
    if name.startswith("quick-start"):
        assert config.allAckInSyncStateSet is True
        port = 30911 if name.endswith("n0") else 31911
        assert (config.listenPort, config.ha_port, config.ha_address) == (port, port + 1, f"127.0.0.1:{port + 1}")
        expected_log = tmp_path / "store" / ("commitlog" if name.endswith("n0") else "log")
        assert config.commitlog_dir == expected_log
    else:
        assert (config.listenPort, config.ha_port) == (10911, 10912)  # RocketMQ's defaults
        assert config.commitlog_dir == tmp_path / "store" / "commitlog"


def test_an_unknown_name_is_a_warning_unless_strict(tmp_path: Path) -> None:
    warnings: list[str] = []
    config = config_from_properties({"brokerName": "b", "fancyNewKnob": "1"}, None, warnings)
    assert config.brokerName == "b"
    assert warnings == ["unknown broker property 'fancyNewKnob' is ignored (strictConfig=true refuses it)"]
    with pytest.raises(ConfigError, match="unknown broker property 'fancyNewKnob'"):
        config_from_properties({"strictConfig": "true", "fancyNewKnob": "1"}, None, [])
    with pytest.raises(ConfigError, match="unknown broker property 'deleteCommitLogFilesInterval'"):
        config_from_properties({"deleteCommitLogFilesInterval": "100"})  # no warnings list: a change at run time, refused


def test_enable_auto_in_sync_replicas_is_ignored_as_in_rocketmqs_controller_mode() -> None:
    warnings: list[str] = []
    config = config_from_properties({"enableAutoInSyncReplicas": "true", "inSyncReplicas": "2",
                                     "totalReplicas": "3"}, None, warnings)
    assert config.adaptiveInSyncReplicas is False and config.inSyncReplicas == 2
    assert any(w.startswith("enableAutoInSyncReplicas=true is IGNORED") and "adaptiveInSyncReplicas" in w
               for w in warnings)
    assert config_from_properties({"adaptiveInSyncReplicas": "true"}).adaptiveInSyncReplicas is True


def test_ha_listen_port_set_or_derived(tmp_path: Path) -> None:
    assert config_from_properties({"listenPort": "20911"}).ha_port == 20912
    assert config_from_properties({"listenPort": "20911", "haListenPort": "21000"}).ha_port == 21000
    with pytest.raises(ConfigError, match="haListenPort must be a TCP port"):
        config_from_properties({"listenPort": "65535", "controllerAddr": "x:1"}).validate()
    with pytest.raises(ConfigError, match="listenPort and haListenPort must differ"):
        config_from_properties({"listenPort": "20911", "haListenPort": "20911"}).validate()


def test_over_remoting_heartbeats_must_come_before_the_controllers_idle_timeout() -> None:
    config = config_from_properties({"controllerProtocol": "remoting", "brokerHeartbeatInterval": "120000",
                                     "controllerHeartBeatTimeoutMills": "300000"})
    with pytest.raises(ConfigError, match="brokerHeartbeatInterval must be under 120000 ms"):
        config.validate()
    config_from_properties({"controllerProtocol": "http", "brokerHeartbeatInterval": "120000",
                            "controllerHeartBeatTimeoutMills": "300000"}).validate()
