"""The check progress of transactional messages: the half queue's and the op queue's watermarks
(checks.py), on disk and on the wire.

File ``<storePathRootDir>/config/transactionProgress.json`` and the body of GET_TRANSACTION_PROGRESS (88002,
mqctl's own code), the same JSON::

    {"halfOffset": 12, "opOffset": 7, "logOffset": 81920, "crc": 1234567}

``logOffset`` is where the commitlog ended after every write and every op record the watermarks count (the
copies stored for check-backs, the discarded messages, the op records that resolved what the half watermark
passed); ``crc`` is the CRC32 of the same object without it, written compactly with its keys sorted. The file is
written with fsync and atomic rename (durable.atomic_write) after each turn that moved a watermark.

**Across a failover.** A slave copies its master's progress every few seconds and takes it only once its own
log is confirmed up to ``logOffset``, as it takes the delay offsets (schedule/delay_offsets.py): a slave never
holds a watermark past a half message whose op record or check copy its own log lacks, so the master it may
become never leaves a transaction unresolved. A new master starts from the last progress it took and reads
again what the old master read after it: it may ask a producer again about a transaction already asked
(a duplicate check-back), never forgets one.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.common.durable import atomic_write
from services.common.errors import MqctlError
from services.remoting.errors import BodyError

__all__ = ["MAX_BODY", "ProgressDamaged", "TransactionProgress", "TransactionProgressFile"]

MAX_BODY = 4096
_MAX_OFFSET = 2**63 - 1
_KEYS = {"halfOffset", "opOffset", "logOffset", "crc"}
RECOVERY = "see docs/operations.md, 'Damaged transactionProgress.json'"


class ProgressDamaged(MqctlError):
    """transactionProgress.json does not read back as the file this module writes."""


@dataclass(frozen=True)
class TransactionProgress:
    half_offset: int = 0
    op_offset: int = 0
    log_offset: int = 0

    def _doc(self) -> dict[str, Any]:
        return {"halfOffset": self.half_offset, "logOffset": self.log_offset, "opOffset": self.op_offset}

    def encode(self) -> bytes:
        doc = self._doc()
        doc["crc"] = zlib.crc32(_canonical(self._doc()))
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> TransactionProgress:
        """A progress as ``encode`` writes it; BodyError naming what is wrong with anything else."""
        if len(raw) > MAX_BODY:
            raise BodyError(f"the transaction progress is larger than {MAX_BODY} bytes")
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            raise BodyError("the transaction progress is not JSON") from None
        if not isinstance(doc, dict) or set(doc) != _KEYS:
            raise BodyError("the transaction progress lacks halfOffset, opOffset, logOffset or crc")
        if not all(type(v) is int and 0 <= v <= _MAX_OFFSET for v in doc.values()):
            raise BodyError("the transaction progress holds a value that is no offset")
        found = cls(doc["halfOffset"], doc["opOffset"], doc["logOffset"])
        if zlib.crc32(_canonical(found._doc())) != doc["crc"]:
            raise BodyError("the transaction progress does not match its crc")
        return found


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


class TransactionProgressFile:
    """The progress on disk: read at start, replaced durably on each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.progress = TransactionProgress()

    def load(self) -> TransactionProgress:
        """The progress on disk (none: all at 0); ProgressDamaged for a file that does not read back."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self.progress = TransactionProgress()
            return self.progress
        except OSError as exc:
            raise ProgressDamaged(f"{self.path} cannot be read ({exc.strerror}); {RECOVERY}") from None
        try:
            self.progress = TransactionProgress.decode(raw)
        except BodyError as exc:
            raise ProgressDamaged(f"{self.path} is damaged ({exc}); {RECOVERY}") from None
        return self.progress

    def save(self, progress: TransactionProgress) -> None:
        """Replace the progress on disk (fsync, atomic rename) unless it is the one there."""
        if progress == self.progress:
            return
        atomic_write(self.path, progress.encode())
        self.progress = progress
