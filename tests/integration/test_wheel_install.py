"""The package as an operator installs it: a wheel built from this tree (``python -m build``), checked
(``twine check``) and installed with ``pipx`` into a clean environment, base install only (no extras, not
editable). Its ``mqctl`` runs a controller and the admin commands against it, and ``mqctl report`` says what
to install (exit 2) instead of failing on a missing PySpark.

The tools come with the ``dev`` extra; without them the test is skipped, except under CI, where it fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqctl.cluster.processes import free_port_pair

pytestmark = [pytest.mark.slow, pytest.mark.wheel]

ROOT = Path(__file__).resolve().parents[2]


def tool(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, check=False)
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is missing: install the dev extra")
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


def run(*argv: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``mqctl`` executable of a pipx install of a freshly built wheel."""
    for module in ("build", "twine", "pipx"):
        tool(module)
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"  # a copy: building never writes into the tree under test
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", "*.egg-info", "build", "dist",
                                                                "__pycache__", ".mypy_cache", ".ruff_cache",
                                                                ".pytest_cache", "mqctl-report"))
    run(sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(source))
    [wheel] = (work / "dist").glob("mqctl-*.whl")
    run(sys.executable, "-m", "twine", "check", "--strict", str(wheel))
    env = {"PIPX_HOME": str(work / "pipx"), "PIPX_BIN_DIR": str(work / "bin"), "PIPX_MAN_DIR": str(work / "man")}
    run(sys.executable, "-m", "pipx", "install", "--python", sys.executable, str(wheel), env=env)
    yield work / "bin" / "mqctl"


def test_the_base_install_runs_a_controller_and_the_admin_commands(installed: Path, tmp_path: Path) -> None:
    assert run(str(installed), "--version").stdout.strip() == "mqctl, version 0.1.0"
    venv_python = installed.resolve().parent / "python"
    for module in ("pyspark", "matplotlib"):  # the base install has neither
        assert subprocess.run([str(venv_python), "-c", f"import {module}"], capture_output=True,
                              check=False).returncode != 0
    port = free_port_pair()
    conf = tmp_path / "controller.conf"
    conf.write_text(f"controllerDLegerPeers = n0-127.0.0.1:{port}\ncontrollerDLegerSelfId = n0\n"
                    f"controllerStorePath = {tmp_path / 'store'}\n")
    controller = subprocess.Popen([str(installed), "startController", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run([str(installed), "getControllerMetaData", "-a", address, "--format", "json"],
                                  capture_output=True, text=True, check=False)
            if done.returncode == 0 and json.loads(done.stdout).get("leaderId") == "n0":
                break
            assert time.monotonic() < deadline, done.stderr
            time.sleep(0.3)
        for path in ("/console", "/console/static/console.js", "/console/static/console.css"):  # in the wheel
            assert httpx.get(f"http://{address}{path}").status_code == 200, path
        config = run(str(installed), "getControllerConfig", "-a", address, "--format", "json").stdout
        assert "controllerStorePath" in config
        missing = subprocess.run([str(installed), "getSyncStateSet", "-a", address, "-b", "nope"],
                                 capture_output=True, text=True, check=False)
        assert missing.returncode == 2 and "broker-set nope is not known to the controller" in missing.stderr
        every_admin_command(installed, address, tmp_path)
        report = subprocess.run([str(installed), "report", "-a", address, "--output", str(tmp_path / "out")],
                                capture_output=True, text=True, check=False)
        assert report.returncode == 2
        hint = "mqctl report needs PySpark and matplotlib, which this install lacks: pip install 'mqctl[report]'"
        assert hint in report.stderr
    finally:
        controller.terminate()
        controller.wait(timeout=30)


def every_admin_command(installed: Path, controller: str, tmp_path: Path) -> None:
    """A broker started from the wheel, then every admin command against it and the controller."""
    mqctl = str(installed)
    port = free_port_pair()
    store = tmp_path / "broker-store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName = WheelCluster\nbrokerName = broker-w\nlistenPort = {port}\n"
                    f"storePathRootDir = {store}\ncontrollerAddr = {controller}\n")
    broker = subprocess.Popen([mqctl, "startBroker", "-c", str(conf)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run([mqctl, "getSyncStateSet", "-a", controller, "-b", "broker-w", "--format", "json"],
                                  capture_output=True, text=True, check=False)
            if done.returncode == 0 and json.loads(done.stdout)["brokers"][0]["masterAddress"] == address:
                break
            assert time.monotonic() < deadline, done.stderr
            time.sleep(0.3)
        commands = [
            ["getBrokerEpoch", "-a", controller, "-b", "broker-w"],
            ["haStatus", "-a", controller, "-b", "broker-w"],
            ["updateTopic", "-a", controller, "-t", "WheelTopic", "-b", address],
            ["sendMessage", "-a", controller, "-t", "WheelTopic", "-b", "broker-w", "-p", "hello", "--count", "3"],
            ["consumeMessage", "-a", controller, "-t", "WheelTopic", "-b", "broker-w", "-g", "wheel-group"],
            ["updateControllerConfig", "-a", controller, "-k", "enableElectUncleanMaster", "-v", "false"],
            ["resetMasterFlushOffset", "-b", address, "-o", "0"],
            ["getControllerMetaData", "-a", controller],
            ["tls", "init", str(tmp_path / "tls")],
            ["help", "electMaster"],
            ["completion", "bash"],
        ]
        for argv in commands:
            done = subprocess.run([mqctl, *argv], capture_output=True, text=True, check=False)
            assert done.returncode == 0, (argv, done.stderr)
        consumed = run(mqctl, "consumeMessage", "-a", controller, "-t", "WheelTopic", "-b", "broker-w",
                       "--format", "json").stdout
        assert consumed.count("hello") == 3
        elect = subprocess.run([mqctl, "electMaster", "-a", controller, "-c", "WheelCluster", "-bn", "broker-w", "-b",
                                "1"], capture_output=True, text=True, check=False)
        assert elect.returncode == 4 and "CONTROLLER_MASTER_STILL_EXIST" in elect.stderr  # it is the master already
        refused = subprocess.run([mqctl, "cleanBrokerMetadata", "-a", controller, "-c", "WheelCluster", "-bn",
                                  "broker-w", "-b", "1"], capture_output=True, text=True, check=False)
        assert refused.returncode == 4 and "alive" in refused.stderr.lower()  # a living broker is kept
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    done = subprocess.run([mqctl, "checkStore", "--store-dir", str(store)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
