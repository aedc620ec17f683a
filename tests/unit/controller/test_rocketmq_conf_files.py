"""RocketMQ's own controller configuration files start an mqctl controller: what we implement is read, the
rest of what RocketMQ defines is ignored with a warning, and an unknown name is a warning too (RocketMQ
ignores what it does not use) unless strictConfig=true. The files below carry the properties of those
under RocketMQ's distribution/conf/controller/ (written here, not copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.errors import ConfigError
from services.controller.config import ControllerConfig, config_from_properties
from services.controller.server import build_config

PEERS3 = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"

FILES = {
    # cluster-3n-independent/controller-n0.conf
    "independent": f"controllerDLegerGroup = group1\ncontrollerDLegerPeers = {PEERS3}\ncontrollerDLegerSelfId = n0\n",
    # controller-standalone.conf
    "standalone": "controllerDLegerGroup = group1\ncontrollerDLegerPeers = n0-127.0.0.1:9878\n"
                  "controllerDLegerSelfId = n0\n",
    # quick-start/namesrv.conf: the controller inside a name server
    "namesrv-quick-start": "enableControllerInNamesrv = true\ncontrollerDLegerGroup = group1\n"
                           "controllerDLegerPeers = n0-127.0.0.1:9878\ncontrollerDLegerSelfId = n0\n",
    # cluster-3n-namesrv-plugin/namesrv-n0.conf: its licence header is an XML comment, which Java's
    # Properties reads as keys ("<!--", "Licensed", ...) and RocketMQ then ignores
    "namesrv-plugin": "<!--\n  Licensed to you under a licence.\n  -->\nlistenPort = 9876\n"
                      f"enableControllerInNamesrv = true\ncontrollerDLegerGroup = group1\n"
                      f"controllerDLegerPeers = {PEERS3}\ncontrollerDLegerSelfId = n0\n",
}
EXTRA = ("metricsPromExporterPort = 5557\nmetricsLabel = a:b\njRaftGroupId = jRaft-Controller\n"
         "scanNotActiveBrokerInterval = 5000\nmappedFileSize = 1048576\n")


@pytest.mark.parametrize("name", sorted(FILES))
def test_rocketmqs_controller_files_start(tmp_path: Path, name: str) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(FILES[name] + EXTRA)
    warnings: list[str] = []
    config = build_config(str(conf), {"controllerStorePath": str(tmp_path / "store"),
                                      "controllerRaftPassword": "x" * 16}, warnings)
    assert (config.controllerDLegerGroup, config.controllerDLegerSelfId) == ("group1", "n0")
    assert config.controllerDLegerPeers == (PEERS3 if "n1-" in FILES[name] else "n0-127.0.0.1:9878")
    assert config.scanNotActiveBrokerInterval == 5000  # one RocketMQ defines and we implement: honoured
    for ignored in ("metricsPromExporterPort", "metricsLabel", "jRaftGroupId", "mappedFileSize"):
        assert f"property {ignored} has no effect in mqctl's controller and is ignored" in warnings
    if "enableControllerInNamesrv" in FILES[name]:
        assert "property enableControllerInNamesrv has no effect in mqctl's controller and is ignored" in warnings
    if name == "namesrv-plugin":
        assert "unknown controller property 'Licensed' is ignored (strictConfig=true refuses it)" in warnings


def test_strict_config_refuses_an_unknown_name(tmp_path: Path) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(FILES["standalone"] + "strictConfig = true\ncontrollerDLegerGrop = typo\n")
    with pytest.raises(ConfigError, match="unknown controller property 'controllerDLegerGrop'"):
        build_config(str(conf), {"controllerStorePath": str(tmp_path / "store")}, [])


def test_a_running_controller_refuses_an_unknown_name() -> None:
    # updateControllerConfig: no warnings list, so a name the controller does not know is refused
    with pytest.raises(ConfigError, match="unknown controller property 'nope'"):
        config_from_properties({"nope": "1"}, ControllerConfig())
