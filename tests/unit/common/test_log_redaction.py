"""No secret reaches a log line (issue 19, item 13): at DEBUG, HTTP and websocket libraries print request
headers, Authorization included. The filter services/common/logsetup.py installs on every handler hides
bearer credentials and every registered secret, from every logger, in messages, arguments and
tracebacks."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.auth import auth_headers, token_ok
from services.common.logsetup import MASK, redact, setup_logging

TOKEN = "tok-9f8e7d6c5b4a"


@pytest.fixture
def debug_log(tmp_path: Path) -> Iterator[Path]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    path = setup_logging(tmp_path / "logs" / "service.log", "DEBUG")
    try:
        yield path
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def emit_everything(secret: str) -> None:
    headers = auth_headers(secret)  # what a service does with its token: put it in a header
    logging.getLogger("websockets.client").debug("> Authorization: %s", headers["Authorization"])
    logging.getLogger("uvicorn.error").debug("< authorization: Bearer %s", secret)
    logging.getLogger("httpcore.http11").debug("send_request_headers.complete headers=%r",
                                               [(b"authorization", f"Bearer {secret}".encode())])
    logging.getLogger("httpx").warning("request with headers %s", headers)
    logging.getLogger("mqctl.controller").info("config dump authToken=%s", secret)
    try:
        raise RuntimeError(f"could not send {headers}")
    except RuntimeError:
        logging.getLogger("services.controller.controller").exception("role-change notification failed")
    logging.getLogger("some.library").debug("bearer %s and BEARER %s", "other-credential", secret)


def test_no_logger_writes_the_token(debug_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emit_everything(TOKEN)
    for handler in logging.getLogger().handlers:
        handler.flush()
    written = debug_log.read_text() + capsys.readouterr().err
    assert TOKEN not in written
    assert "other-credential" not in written
    assert f"Bearer {MASK}" in written and "authToken=" + MASK in written
    assert "RuntimeError" in written  # the traceback is kept, with the secret hidden


def test_a_token_checked_by_a_service_is_hidden_too(debug_log: Path) -> None:
    expected = "checked-only-secret-42"
    assert token_ok(expected, f"Bearer {expected}")
    logging.getLogger("anything").info("the expected token is %s", expected)
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert expected not in debug_log.read_text()


def test_redact_leaves_other_text_alone() -> None:
    assert redact("GET /v1/controller/metadata 200") == "GET /v1/controller/metadata 200"
    assert redact("Authorization: Bearer abc.def") == f"Authorization: Bearer {MASK}"
