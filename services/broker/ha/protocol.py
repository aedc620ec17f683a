"""Replication protocol logic, without I/O.

Theory of operation
-------------------
1. The slave connects and sends its handshake (its broker id, learner flag, sync-from-last-file flag).
2. The master answers with its epoch entries and max offset.
3. The slave finds the *consistent point*: walking its own epochs newest first, the first epoch the
   master also has with the same start offset; the logs agree up to the smaller of the two ends. It
   truncates its log there, durably, before it acknowledges anything. No common epoch (or a point below
   the master's oldest data) means the logs cannot be reconciled: the slave stops with an error.
4. The slave acks its max offset; the master streams whole records from there. If retention has
   deleted that offset on the master, it streams from its oldest data instead, and the slave, seeing
   its first frame land past its end, discards its log and starts over there (as a Kafka follower does
   when its offset is out of the leader's range): everything it held was older than anything the
   master still keeps. A frame never crosses
   an epoch boundary, and every epoch (even one with no data) is announced with an empty frame before
   its bytes, so the slave's epoch file ends up identical to the master's.
5. The slave checks each frame: its offset must be the slave's own end (continuity), its epoch must
   never go back. It appends, sets confirmOffset = min(master's confirmOffset, own max), and acks.
6. The master checks each ack: never beyond its own max offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.broker.epoch_file import EpochEntry, EpochFileCache
from services.broker.ha.frames import MasterHandshake, ProtocolError, Transfer


class Unreconcilable(Exception):
    """The slave's log and the master's cannot be made consistent by truncation."""


WAY_OUT = ("To rebuild this replica from the master, stop it, move its store directory aside and start it "
           "again (see docs/operations.md, 'replica cannot be reconciled').")


def entries_with_end(pairs: list[tuple[int, int]] | list[EpochEntry], last_end: int) -> EpochFileCache:
    cache = EpochFileCache(None)
    entries = [p if isinstance(p, EpochEntry) else EpochEntry(p[0], p[1]) for p in pairs]
    cache.init_from_entries(entries)
    cache.set_last_end(last_end)
    return cache


def decide_truncation(local: list[EpochEntry], local_min: int, local_max: int,
                      master: MasterHandshake) -> int:
    """Where the slave must cut its log before replicating (== local_max when nothing is cut)."""
    if local_max == local_min:
        return local_max  # an empty replica has nothing to reconcile, whatever epochs it remembers
    if not local:
        raise Unreconcilable(f"this replica has data ({local_min}..{local_max}) but no epoch entries, so it "
                             f"cannot tell which of it the master agrees with. {WAY_OUT}")
    if not master.entries:
        raise Unreconcilable(f"the master has no epoch entries but this replica has {len(local)}. {WAY_OUT}")
    mine = entries_with_end(local, local_max)
    theirs = entries_with_end(list(master.entries), master.max_offset)
    point = mine.find_consistent_point(theirs)
    if point < 0 and local_max <= master.entries[0][1]:
        # All of this log lies before the master's oldest epoch: retention deleted that history there (and
        # its epochs). Nothing to compare or cut; the master streams from its oldest data and this replica
        # starts over there (step 4).
        return local_max
    if point < 0:
        raise Unreconcilable(f"no epoch in common with the master (local epochs {[(e.epoch, e.start_offset) for e in local]}, "
                             f"master epochs {list(master.entries)}). {WAY_OUT}")
    if point < master.entries[0][1]:
        raise Unreconcilable(f"the consistent point {point} is below the master's oldest data "
                             f"({master.entries[0][1]}). {WAY_OUT}")
    if point < local_min:
        raise Unreconcilable(f"the consistent point {point} is below this replica's oldest data ({local_min}). "
                             f"{WAY_OUT}")
    return min(point, local_max)


# ---------------------------------------------------------------------- slave side: frame checks
@dataclass(frozen=True)
class SlaveStep:
    """What the slave must do with one transfer frame."""

    new_epoch: tuple[int, int] | None  # (epoch, startOffset) to append to the epoch file
    append: bytes                      # bytes to write at frame.offset
    confirm_offset: int                # new confirmOffset (min of the master's and our max after append)


def slave_step(frame: Transfer, local_min: int, local_max: int, last_epoch: int) -> SlaveStep:
    if frame.offset == -1 and not frame.body:
        # RocketMQ's master, before it has anything to stream from (an empty log), beats with offset -1
        # and its first epoch: only the confirmOffset counts.
        return SlaveStep(None, b"", min(frame.confirm_offset, local_max))
    empty_log = local_max == local_min
    if frame.offset != local_max and not empty_log:
        raise ProtocolError(f"offset discontinuity: frame at {frame.offset}, local log ends at {local_max}")
    new_epoch = None
    if frame.epoch < last_epoch:
        if frame.body:
            raise ProtocolError(f"epoch went back: frame epoch {frame.epoch} after local epoch {last_epoch}")
    elif frame.epoch > last_epoch:
        if frame.epoch_start_offset > frame.offset:
            raise ProtocolError(f"epoch {frame.epoch} starts at {frame.epoch_start_offset}, after the frame "
                                f"offset {frame.offset}")
        new_epoch = (frame.epoch, frame.epoch_start_offset)
    new_max = (frame.offset + len(frame.body)) if frame.body else local_max
    return SlaveStep(new_epoch, frame.body, min(frame.confirm_offset, new_max))


# ---------------------------------------------------------------------- master side
def transfer_start(request_offset: int, master_min: int, master_max: int, segment_size: int,
                   sync_from_last_file: bool) -> int:
    """Where the master starts streaming for a slave whose log ends at ``request_offset``."""
    if request_offset > master_max:
        raise ProtocolError(f"the slave claims offset {request_offset}, beyond the master's end {master_max}")
    if request_offset == 0:
        if sync_from_last_file:
            return master_max - master_max % segment_size
        return master_min
    if request_offset < master_min:
        # Retention deleted what follows the slave's end here: it starts over from the oldest data kept (its
        # first frame lands past its end, which a slave accepts only as the first frame: SlaveSession.apply).
        return master_min
    return request_offset


def epoch_index_for(entries: list[EpochEntry], offset: int) -> int:
    """The first epoch not entirely before ``offset`` (an empty epoch at ``offset`` counts)."""
    for i, entry in enumerate(entries):
        if entry.end_offset > offset or entry.start_offset >= offset:
            return i
    return max(0, len(entries) - 1)


def check_ack(offset: int, master_max: int) -> None:
    if offset > master_max:
        raise ProtocolError(f"ack {offset} is beyond the master's max offset {master_max}")
