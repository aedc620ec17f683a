"""An offline check of a broker's store (``mqctl checkStore``): everything recovery and reads would find,
without changing a byte.

Recovery scans only the newest commitlog segments and reads older records when a consumer asks for
them; this reads every record of every segment (CRC and fields), checks the consume queues against the
log, the checkpoint, the epoch file and its ``.bak``, and the identity files. Each finding says whether
the broker repairs it by itself at its next start or needs the operator (docs/operations.md). Run it
on a stopped broker: a running one changes the files under it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.broker.commitlog import CommitLog, CommitLogError
from services.broker.consume_queue import ConsumeQueueStore
from services.broker.epoch_file import EpochFileCache, decode_epoch_file
from services.broker.identity import IdentityFiles
from services.broker.store import load_checkpoint


@dataclass(frozen=True)
class Finding:
    path: str
    problem: str
    repaired_at_start: bool  # False: the broker refuses to start, or consumers get MESSAGE_DAMAGED
    offset: int | None = None


@dataclass
class StoreReport:
    store_dir: str
    min_offset: int = 0
    max_offset: int = 0
    segments: int = 0
    queues: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def damaged(self) -> list[Finding]:
        """What the operator must act on."""
        return [f for f in self.findings if not f.repaired_at_start]

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["epochs"] = [{"epoch": e, "startOffset": s} for e, s in self.epochs]
        return doc


def check_store(root: Path, segment_size: int, epoch_file: Path | None = None,
                identity_file: Path | None = None, commitlog_dir: Path | None = None) -> StoreReport:
    report = StoreReport(str(root))
    checkpoint, problem = load_checkpoint(root / "checkpoint")
    if problem:
        report.findings.append(Finding(str(root / "checkpoint"), f"{problem}; rebuilt from the queues and the "
                                       "commitlog at start", True))
    commitlog = commitlog_dir or root / "commitlog"
    log = CommitLog(commitlog, segment_size)
    try:
        if commitlog.is_dir():
            log.open(recover=False)
        _check_log(report, log, checkpoint.get("flushedOffset", 0))
        _check_epochs(report, EpochFileCache(epoch_file or root / "epochFileCheckpoint"), log)
        _check_queues(report, root / "consumequeue", log)
    except CommitLogError as exc:
        report.findings.append(Finding(str(commitlog), exc.remark, False))
    finally:
        log.close_files()
    _check_identity(report, IdentityFiles(identity_file or root / "brokerIdentity"))
    return report


def _check_log(report: StoreReport, log: CommitLog, flushed: int) -> None:
    report.min_offset, report.max_offset, report.segments = log.min_offset, log.max_offset, len(log.segments)
    if log.segments and log.max_offset < flushed:
        report.findings.append(Finding(str(log.segments[-1].path), f"the log ends at {log.max_offset} but the "
                                       f"checkpoint says {flushed} bytes had been flushed: data was lost",
                                       False, log.max_offset))
    for damage in log.scrub(flushed):
        what = "a torn last write, cut at start" if damage.torn else "valid records follow or it was flushed"
        report.findings.append(Finding(str(damage.path), f"{damage.reason} ({what})", damage.torn, damage.offset))


def _check_epochs(report: StoreReport, cache: EpochFileCache, log: CommitLog) -> None:
    verdict = cache.diagnose(log_has_data=log.max_offset > log.min_offset)
    if verdict is not None:
        refused, why = verdict
        report.findings.append(Finding(str(cache.path), why, not refused))
    for path in (cache.path, cache.backup_path):  # what load() would use, unless it refuses
        if verdict is not None and verdict[0]:
            break
        pairs = decode_epoch_file(path.read_bytes().decode("utf-8", "replace")) if path and path.exists() else None
        if pairs is not None:
            report.epochs = pairs
            break


def _check_queues(report: StoreReport, root: Path, log: CommitLog) -> None:
    queues = ConsumeQueueStore(root, readonly=True)
    try:
        queues.load()
        report.queues = len(queues.queues)
        for path in queues.ignored:
            report.findings.append(Finding(str(path), "not a topic or queue id: ignored", True))
        indexed = queues.verify(log.min_offset, log.max_offset, log.segment_size, log.header_at)
        for (topic, queue_id), kept in sorted(queues.cut.items()):
            cq = queues.queues[(topic, queue_id)]
            report.findings.append(Finding(str(cq.path), f"entries from {kept} on do not match the commitlog; the "
                                           f"log is indexed again from offset {indexed} at start", True))
    finally:
        queues.close()


def _check_identity(report: StoreReport, files: IdentityFiles) -> None:
    logging.disable(logging.ERROR)  # the loaders log what is reported here as a finding
    try:
        if files.path.exists() and files.load() is None:
            report.findings.append(Finding(str(files.path), "malformed: the broker would ignore it and apply for "
                                           "a new broker id", False))
        if files.temp_path.exists() and files.load_temp() is None:
            report.findings.append(Finding(str(files.temp_path), "malformed: ignored at start", True))
    finally:
        logging.disable(logging.NOTSET)

