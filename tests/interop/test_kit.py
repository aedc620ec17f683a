"""The kit's own failures are clear: an unreachable registry names the artifact Maven could not get, and
a server that exits before it is ready is reported with the tail of its output."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.rocketmq import PINNED, ArtifactUnavailable, NameServer, ProcessExited, RocketMQ, Runtime
from tests.rocketmq.fetch import require_java

pytestmark = pytest.mark.timeout(120)

NOWHERE = """<settings><mirrors><mirror><id>nowhere</id><mirrorOf>*</mirrorOf>
<url>http://127.0.0.1:9/maven2</url></mirror></mirrors></settings>"""


def test_an_unreachable_registry_is_named_with_the_artifact(tmp_path: Path) -> None:
    settings = tmp_path / "settings.xml"
    settings.write_text(NOWHERE)
    kit = RocketMQ(PINNED, cache=tmp_path / "cache",
                   maven_args=("-s", str(settings), f"-Dmaven.repo.local={tmp_path / 'repo'}"))
    with pytest.raises(ArtifactUnavailable) as caught:
        kit.fetch()
    assert "the registry cannot be reached" in str(caught.value)
    assert "org.apache.maven.plugins:maven-dependency-plugin:3.6.1" in caught.value.artifacts
    assert not kit.is_fetched()


def test_a_server_that_exits_is_reported_with_its_output(tmp_path: Path) -> None:
    runtime = Runtime(require_java(), RocketMQ(PINNED).fetch(), tmp_path / "home")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        namesrv = NameServer(runtime, tmp_path / "namesrv", taken.getsockname()[1])
        namesrv.process.start()
        try:
            with pytest.raises(ProcessExited) as caught:
                namesrv.wait_ready(60)
        finally:
            namesrv.process.signal(signal.SIGKILL)
    assert "namesrv (namesrv" in str(caught.value)
    assert "Address already in use" in str(caught.value)
