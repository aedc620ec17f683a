"""The delivery progress of the schedule queues (RocketMQ's ``delayOffset.json``): per level the watermark
of its queue in SCHEDULE_TOPIC_XXXX, and the timer queue's, on disk and on the wire.

File ``<storePathRootDir>/config/delayOffset.json`` and the body of GET_ALL_DELAY_OFFSET (45), the same
JSON::

    {"offsetTable": {"1": 12, "3": 40}, "timerOffset": 7, "logOffset": 81920, "crc": 1234567}

``offsetTable`` is RocketMQ's field (level -> offset of the next entry to deliver); ``timerOffset`` is the
timer queue's; ``logOffset`` is where the commitlog ended after the last delivery this table counts; ``crc``
is the CRC32 of the same object without it, written compactly with its keys sorted. The file is written with
fsync and atomic rename (durable.atomic_write) whenever a watermark moves, after the deliveries it counts
were stored with PUT_OK.

**Across a failover.** A slave copies its master's table every few seconds (as RocketMQ's SlaveSynchronize
does with 45) and takes it only once its own log is confirmed up to the table's ``logOffset``: a slave never
holds a watermark above a delivery its own log does not hold, so the master it may become never skips a
message the old master delivered into a log that was then cut. A new master starts from the last table it
took, and delivers again what the old master delivered after that: at least once, a duplicate possible for
the few seconds before a failover, nothing lost.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.broker.schedule.levels import MAX_LEVELS
from services.common.durable import atomic_write
from services.common.errors import MqctlError
from services.remoting.errors import BodyError

__all__ = ["MAX_BODY", "DelayOffsetFile", "DelayOffsetsDamaged", "DelayProgress"]

log = logging.getLogger(__name__)

#: The largest table read, from the file or a master (MAX_LEVELS entries of 20-digit numbers fit in 2 KiB).
MAX_BODY = 16 * 1024
_MAX_OFFSET = 2**63 - 1
RECOVERY = "see docs/operations.md, 'Damaged delayOffset.json'"


class DelayOffsetsDamaged(MqctlError):
    """delayOffset.json does not read back as the file this module writes."""


@dataclass(frozen=True)
class DelayProgress:
    """The watermark of each level's queue (1-based level; a level not listed is at 0), the timer queue's, and
    the commitlog end after the deliveries they count."""

    levels: dict[int, int] = field(default_factory=dict)
    timer: int = 0
    log_offset: int = 0

    def level(self, level: int) -> int:
        return self.levels.get(level, 0)

    def _doc(self) -> dict[str, Any]:
        return {"logOffset": self.log_offset, "offsetTable": {str(k): v for k, v in sorted(self.levels.items())},
                "timerOffset": self.timer}

    def encode(self) -> bytes:
        doc = self._doc()
        doc["crc"] = zlib.crc32(_canonical(self._doc()))
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> DelayProgress:
        """A table as ``encode`` writes it; BodyError naming what is wrong with anything else."""
        if len(raw) > MAX_BODY:
            raise BodyError(f"the delay offset table is larger than {MAX_BODY} bytes")
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            raise BodyError("the delay offset table is not JSON") from None
        if not isinstance(doc, dict) or set(doc) != {"offsetTable", "timerOffset", "logOffset", "crc"} \
                or not isinstance(doc["offsetTable"], dict):
            raise BodyError("the delay offset table lacks offsetTable, timerOffset, logOffset or crc")
        table = doc["offsetTable"]
        if len(table) > MAX_LEVELS or not all(k.isdecimal() and 0 < int(k) <= MAX_LEVELS for k in table):
            raise BodyError(f"the delay offset table names a level outside 1..{MAX_LEVELS}")
        numbers = [*table.values(), doc["timerOffset"], doc["logOffset"], doc["crc"]]
        if not all(type(n) is int and 0 <= n <= _MAX_OFFSET for n in numbers):
            raise BodyError("the delay offset table holds a value that is no offset")
        found = cls({int(k): v for k, v in table.items()}, doc["timerOffset"], doc["logOffset"])
        if zlib.crc32(_canonical(found._doc())) != doc["crc"]:
            raise BodyError("the delay offset table does not match its crc")
        return found


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


class DelayOffsetFile:
    """The table on disk: read at start, replaced durably on each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.progress = DelayProgress()

    def load(self) -> DelayProgress:
        """The table on disk (an empty one if there is none); DelayOffsetsDamaged for one that does not read
        back."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self.progress = DelayProgress()
            return self.progress
        except OSError as exc:
            raise DelayOffsetsDamaged(f"{self.path} cannot be read ({exc.strerror}); {RECOVERY}") from None
        try:
            self.progress = DelayProgress.decode(raw)
        except BodyError as exc:
            raise DelayOffsetsDamaged(f"{self.path} is damaged ({exc}); {RECOVERY}") from None
        return self.progress

    def save(self, progress: DelayProgress) -> None:
        """Replace the table on disk (fsync, atomic rename) unless it is the one there."""
        if progress == self.progress:
            return
        atomic_write(self.path, progress.encode())
        self.progress = progress
