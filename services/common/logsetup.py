"""Process logging: one line per event, to a rotating file under the data dir and to stderr.

Every line carries the process's identity (``node=n0`` for a controller; ``broker=broker-a id=1
role=MASTER epoch=2`` for a broker), kept current by the service through :data:`CONTEXT`.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

#: Fields stamped on every log line; services update them as their identity and role change.
CONTEXT: dict[str, object] = {}

FORMAT = "%(asctime)s %(levelname)s %(context)s[%(name)s] %(message)s"


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.context = "".join(f"{k}={v} " for k, v in CONTEXT.items() if v is not None)
        return True


def setup_logging(log_file: Path, level: str) -> Path:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter(FORMAT)
    context = ContextFilter()
    root = logging.getLogger()
    root.handlers.clear()
    file_handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=50 * 2**20, backupCount=5)
    stderr_handler = logging.StreamHandler(sys.stderr)
    for handler in (file_handler, stderr_handler):
        handler.setFormatter(fmt)
        handler.addFilter(context)
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return log_file
