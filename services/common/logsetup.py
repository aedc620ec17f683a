"""Process logging: one line per event, to a rotating file under the data dir and to stderr.

Every line carries the process's identity (``node=n0`` for a controller; ``broker=broker-a id=1
role=MASTER epoch=2`` for a broker), kept current by the service through :data:`CONTEXT`.

No line carries a secret: every record of every logger passes :class:`RedactSecrets` on its way to a
handler, which hides bearer credentials (``Bearer <token>``, as HTTP and websocket libraries print request
headers at DEBUG) and every secret registered with :func:`add_secret` (the auth token is registered where
it is put in a header or checked, services/common/auth.py), in the message, its arguments and any
traceback.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from pathlib import Path

#: Fields stamped on every log line; services update them as their identity and role change.
CONTEXT: dict[str, object] = {}

FORMAT = "%(asctime)s %(levelname)s %(context)s[%(name)s] %(message)s"


#: What a hidden secret is replaced with.
MASK = "******"
#: Shorter secrets are not searched for as text (a two-letter token would mask every word holding those
#: letters); they are still hidden where they follow "Bearer".
MIN_SECRET_LENGTH = 4
_SECRETS: set[str] = set()
_CREDENTIALS = re.compile(r"(?i)\b(bearer|basic)(\s+)\S+")


def add_secret(secret: str | None) -> None:
    """Hide ``secret`` in every log line from now on."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        _SECRETS.add(secret)


def redact(text: str) -> str:
    text = _CREDENTIALS.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites a record with its secrets hidden (a handler filter: it sees the records of every logger)."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: the handler reports it as it would have
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.context = "".join(f"{k}={v} " for k, v in CONTEXT.items() if v is not None)
        return True


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """The rotating log file, which a full disk must not turn into a traceback on stderr for every line: the
    first line it cannot write says so once on stderr (where every line also goes), and so does the first one
    it can write again."""

    failing = False
    _failed_now = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        super().emit(record)
        if self.failing and not self._failed_now:
            self.failing = False
            sys.stderr.write(f"the log file {self.baseFilename} is written again\n")

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self._failed_now = True
        if not self.failing:
            self.failing = True
            sys.stderr.write(f"cannot write the log file {self.baseFilename} ({error.strerror or error}); its lines "
                             "go to stderr only until it can\n")


def setup_logging(log_file: Path, level: str) -> Path:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter(FORMAT)
    context = ContextFilter()
    secrets = RedactSecrets()
    root = logging.getLogger()
    root.handlers.clear()
    file_handler = LogFileHandler(log_file, maxBytes=50 * 2**20, backupCount=5)
    stderr_handler = logging.StreamHandler(sys.stderr)
    for handler in (file_handler, stderr_handler):
        handler.setFormatter(fmt)
        handler.addFilter(context)
        handler.addFilter(secrets)
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return log_file
