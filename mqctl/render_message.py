"""One stored message as mqadmin's queryMsgById, queryMsgByUniqueKey and queryMsgByOffset print it
(QueryMsgByIdSubCommand.printMsg and QueryMsgByUniqueKeySubCommand.showMessage), with its message track: what
each consumer group of its topic did with it (DefaultMQAdminExtImpl.messageTrackDetail).

mqadmin writes each message's body to ``/tmp/rocketmq/msgbodys/<msgId>`` and prints that path; so does mqctl
(``save_body``), but only under a name made of the hex digits a message id has, and never through a symbolic
link: the id comes from the message's own properties, which anyone who can send may set."""

from __future__ import annotations

import codecs
import errno
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from mqctl.terminal import printable
from services.common.errors import MqctlError
from services.remoting.javaorder import hash_map_order
from services.remoting.message import PulledMessage, SocketAddress, offset_msg_id

__all__ = ["BODY_DIR", "Track", "body_text", "client_msg_id", "host_text", "human_time", "message_text", "properties_text",
           "save_body", "tracks_text"]

#: Where mqadmin writes the bodies (QueryMsgByIdSubCommand.createBodyFile).
BODY_DIR = Path("/tmp/rocketmq/msgbodys")
#: ``string2messageProperties`` makes a HashMap with this capacity: the order ``Properties:`` prints them in.
_PROPERTIES_CAPACITY = 128
_SAFE_ID = re.compile(r"[0-9A-Fa-f]{1,64}")


@dataclass(frozen=True)
class Track:
    """MessageTrack: a consumer group of the message's topic, and what it did with the message."""

    group: str
    track_type: str
    exception_desc: str | None = None

    def __str__(self) -> str:
        desc = "null" if self.exception_desc is None else self.exception_desc
        return f"MessageTrack [consumerGroup={self.group}, trackType={self.track_type}, exceptionDesc={desc}]"


def client_msg_id(m: PulledMessage) -> str:
    """MessageClientExt.getMsgId: the unique key the producer set, else the offset message id."""
    return m.properties.get("UNIQ_KEY") or offset_msg_id(m.store_host, m.commit_log_offset)


def human_time(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local time with milliseconds after a comma."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def host_text(host: SocketAddress) -> str:
    """RemotingHelper.parseSocketAddressAddr: ``ip:port`` (an IPv6 address in Java's long form, bracketed)."""
    if not host.v6:
        return ".".join(str(b) for b in host.ip) + f":{host.port}"
    groups = ":".join(f"{int.from_bytes(host.ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"[{groups}]:{host.port}"


def properties_text(properties: dict[str, str]) -> str:
    """``HashMap.toString()`` of the message's properties, in the map's own order."""
    return "{" + ", ".join(f"{printable(k)}={printable(properties[k])}"
                           for k in hash_map_order(properties, _PROPERTIES_CAPACITY)) + "}"


def body_text(body: bytes, charset: str) -> str:
    """The body decoded with ``charset`` (``-f``), as Java's ``new String(bytes, charset)`` replaces what does not
    decode."""
    try:
        codecs.lookup(charset)
    except LookupError:
        raise MqctlError(f"unknown charset {charset!r} (-f)") from None
    return printable(body.decode(charset, errors="replace"))


def save_body(m: PulledMessage, suffix: str = "", body_dir: Path | None = None) -> str:
    """Write the body where mqadmin writes it (BODY_DIR); the path. A message whose id is not hex digits is
    written under its offset message id instead."""
    body_dir = body_dir or BODY_DIR
    name = client_msg_id(m)
    if _SAFE_ID.fullmatch(name) is None:
        name = offset_msg_id(m.store_host, m.commit_log_offset)
    path = body_dir / (name + suffix)
    try:
        body_dir.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(body_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "wb") as out:
            out.write(m.body)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise MqctlError(f"cannot write the message body to {path}: {why}") from None
    return str(path)


def message_text(m: PulledMessage, body_path: str, *, offset_id: bool, charset: str | None = None,
                 properties: dict[str, str] | None = None) -> str:
    """The lines printMsg (``offset_id``: with its ``OffsetID:`` line first) or showMessage print for a message.
    ``properties``: the message's as the client holds them (a pull adds the queue's offsets)."""
    tags, keys = m.properties.get("TAGS"), m.properties.get("KEYS")
    rows = [("Topic:", printable(m.topic)), ("Tags:", f"[{printable(tags) if tags is not None else 'null'}]"),
            ("Keys:", f"[{printable(keys) if keys is not None else 'null'}]"), ("Queue ID:", str(m.queue_id)),
            ("Queue Offset:", str(m.queue_offset)), ("CommitLog Offset:", str(m.commit_log_offset)),
            ("Reconsume Times:", str(m.reconsume_times)), ("Born Timestamp:", human_time(m.born_timestamp)),
            ("Store Timestamp:", human_time(m.store_timestamp)), ("Born Host:", host_text(m.born_host)),
            ("Store Host:", host_text(m.store_host)), ("System Flag:", str(m.sys_flag)),
            ("Properties:", properties_text(m.properties if properties is None else properties)),
            ("Message Body Path:", body_path)]
    if offset_id:
        rows.insert(0, ("OffsetID:", offset_msg_id(m.store_host, m.commit_log_offset)))
    if charset is not None:
        rows.append(("Message Body:", body_text(m.body, charset)))
    return "".join(f"{label:<20} {value}\n" for label, value in rows)


def tracks_text(tracks: list[Track], newline: bool) -> str:
    """What follows a message: its track per consumer group (``newline``: one a line, as printMsg prints them;
    showMessage runs them together), or printMsg's warning when the topic has no consumer group."""
    if not tracks:
        return "\n\nWARN: No Consumer"
    return "\n\n" + "".join("\n".join(printable(line) for line in str(t).split("\n")) + ("\n" if newline else "")
                             for t in tracks)
