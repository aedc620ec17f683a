"""What may differ between real mqadmin's output about RocketMQ's cluster and about ours, and nothing else:
each rule below is applied to both outputs before they are compared, and says why it must differ.

* Addresses: the two clusters listen on different ports. Each address becomes the role it plays there
  (``<controller n0>``, ``<broker 2>``, ``<broker 2 HA>``); any other (a client's connection, as a slave's
  HA link seen by its master or the host a message was sent from) becomes ``<client>``.
* Which controller leads: each group elects its own leader (DLedger's and our Raft's elections are
  random), so the leader's id and address become ``<leader>``.
* Lists in the order of a Java hash set of addresses (getBrokerEpoch's brokers): the order follows the
  ports, so the blocks are compared sorted.
* Commitlog offsets: our commitlog record is not RocketMQ's (a CRC over the whole record, docs/storage.md),
  so the same messages end at other offsets (max offsets, epoch ranges, a message's commitLogOffset and
  the offset message id built from it).
* Message ids and times: each send gets its own id and timestamps (and mqadmin 5.5's queryMsgByKey prints
  both, with the commitlog offset, in its #IndexKey column).
* Live figures of haStatus: transfer speeds and the last read and write times change from moment to moment.
* SyncStateSet epochs: each change of a group's SyncStateSet moves it on, and how often a group's set
  changed depends on timing: a RocketMQ slave that falls behind for ``haMaxTimeSlaveNotCatchup`` on a busy
  machine is shrunk out and joins again (seen at startup: epoch 5 where three joins give 3), and after an
  election RocketMQ's slaves rejoin the new master at different times (one may first follow the old
  master's HA address, which a name server that has not yet heard from the new master still gives it).
  The tests that apply this rule check the number on its own side instead (at least one change per join).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from tests.interop.admin_sides import Side

ADDRESS = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})(?!\d)")
#: A UNIQ_KEY or offset message id: 32 upper-case hex digits.
MSG_ID = re.compile(r"\b[0-9A-F]{32}\b")
TIMESTAMP = re.compile(r"\b(bornTimestamp|storeTimestamp)=\d+")
COMMIT_LOG = re.compile(r"\b(commitLogOffset|startOffset|endOffset)=\d+")
MAX_OFFSET_LINE = re.compile(r"^(#(?:Master)?CommitLogMaxOffset\t)\d+$", re.MULTILINE)
SYNC_STATE_SET_EPOCH = re.compile(r"(#SyncStateSetEpoch\t)\d+")
LEADER = re.compile(r"^(#ControllerLeader(?:Id|Address)\t).*$", re.MULTILINE)
#: haStatus's live figures (as test_mqadmin_differential.py masks them).
LIVE_FIELD = re.compile(r"^(#TransferSpeed\(KB/s\)\t|#Last(?:Read|Write)Time\t).*$", re.MULTILINE)
LIVE_ROW = re.compile(r"^(\S+ +\d+ +\d+ +)\S+", re.MULTILINE)

Rule = Callable[[str], str]


class Addresses:
    """Every address of one side by the role it plays there."""

    def __init__(self, side: Side) -> None:
        self.names = {address: f"<controller n{i}>" for i, address in enumerate(side.controllers)}
        info = side.sync_state()
        for replica in (*info.in_sync_replicas, *info.not_in_sync_replicas):
            host, port = str(replica.broker_address).rsplit(":", 1)
            self.names[f"{host}:{port}"] = f"<broker {replica.broker_id}>"
            self.names[f"{host}:{int(port) + 1}"] = f"<broker {replica.broker_id} HA>"

    def __call__(self, text: str) -> str:
        return ADDRESS.sub(lambda m: self.names.get(m.group(0), "<client>"), text)


def message_ids(text: str) -> str:
    return MSG_ID.sub("<msgId>", text)


#: mqadmin 5.5's queryMsgByKey #IndexKey: the hour of the store time, topic, K, key, message id, commitlog offset.
INDEX_KEY = re.compile(r"\b\d{13}@(\S+@K@\S+@<msgId>)@\d+")


def index_keys(text: str) -> str:
    """mqadmin 5.5's #IndexKey column (after ``message_ids``): its hour and commitlog offset."""
    return INDEX_KEY.sub(r"<hour>@\1@<offset>", text)


def times(text: str) -> str:
    return TIMESTAMP.sub(r"\1=<time>", text)


def commit_log_offsets(text: str) -> str:
    return MAX_OFFSET_LINE.sub(r"\1<offset>", COMMIT_LOG.sub(r"\1=<offset>", text))


def sync_state_set_epoch(text: str) -> str:
    return SYNC_STATE_SET_EPOCH.sub(r"\1<epoch>", text)


def sync_state_set_epochs(text: str) -> list[int]:
    """Every SyncStateSet epoch the text shows."""
    return [int(m) for m in re.findall(r"#SyncStateSetEpoch\t(\d+)", text)]


def leader(text: str) -> str:
    return LEADER.sub(r"\1<leader>", text)


def live_figures(text: str) -> str:
    lines = LIVE_FIELD.sub(r"\1<live>", text)
    return "\n".join(line if line.startswith("#") else LIVE_ROW.sub(r"\1<live>", line) for line in lines.split("\n"))


def blocks_sorted(text: str) -> str:
    """Blocks (separated by blank lines) in sorted order, for lists in the order of a hash of addresses."""
    body = text.strip("\n")
    start = text.index(body) if body else 0
    return text[:start] + "\n\n".join(sorted(body.split("\n\n"))) + text[start + len(body):]


def applied(text: str, rules: Iterable[Rule]) -> str:
    for rule in rules:
        text = rule(text)
    return text
