"""GET_BROKER_CONFIG (26) on our broker: its own properties as properties text, booleans as Java writes them,
the auth token masked; UPDATE_BROKER_CONFIG (25) is not served (a broker's configuration changes by a restart)."""

from __future__ import annotations

from pathlib import Path

from services.common.codes import ResponseCode as C
from services.common.props import parse_properties
from services.remoting import admin_headers as ah
from services.remoting.command import make_request
from tests.unit.broker.test_broker_remoting import FakeBroker, serve


def test_the_config_is_properties_text_with_the_token_masked(tmp_path: Path) -> None:
    broker = FakeBroker(tmp_path, authToken="secret-token")
    try:
        answer = serve(broker, make_request(ah.GET_BROKER_CONFIG, 1))
        assert answer.code == C.SUCCESS and answer.ext_fields["version"].startswith("{")
        text = answer.body.decode()
        props = parse_properties(text, "answer")
        assert props["brokerName"] == broker.config.brokerName and props["listenPort"] == "10911"
        assert props["authToken"] == "******" and "secret-token" not in text
        assert props["allAckInSyncStateSet"] == "false"
        refused = serve(broker, make_request(ah.UPDATE_BROKER_CONFIG, 1, {}, b"authToken=x\n"))
        assert refused.code == C.REQUEST_CODE_NOT_SUPPORTED
    finally:
        broker.store.close()
