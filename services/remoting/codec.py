"""Frames of RocketMQ's remoting protocol: bytes to commands and back, with no I/O.

A frame (``RemotingCommand.encode``/``decode``; every integer big-endian)::

    0  4  length     4 + headerLength + bodyLength (the field itself not counted)
    4  4  mark       serializeType << 24 | headerLength      serializeType: 0 JSON, 1 ROCKETMQ
    8  .. header     headerLength bytes, written as the serialize type says
    .. .. body       the rest of the frame, opaque bytes

A JSON header is the fastjson text of the command's bean: its fields sorted by name, absent ones left
out, language and serializeTypeCurrentRPC by their enum names::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}

A ROCKETMQ header (``RocketMQSerializable``)::

    0  2  code (int16)
    2  1  language code
    3  2  version (int16)
    5  4  opaque
    9  4  flag
    13 4  remarkLength, then the remark in UTF-8 (length 0: no remark)
    .. 4  extFieldsLength, then entries up to the header's end:
          2 keyLength | key (UTF-8) | 4 valueLength | value (UTF-8)

RocketMQ reads a zero-length remark, key or value as null: the remark is then None here, and an
extFields entry whose key or value is empty is left out (a header field that is null is absent).

``FrameDecoder`` takes bytes as they arrive and returns whole commands. It checks a frame's length
prefix before it keeps any of its body, so it never holds more than one frame and never more than
``max_frame_size`` bytes; anything malformed raises ``RemotingProtocolError`` and the decoder stays
failed (the connection is out of step and must be closed).
"""

from __future__ import annotations

import json
import struct
from typing import Any

from services.remoting import fastjson
from services.remoting.command import (
    DEFAULT_VERSION,
    INT32_MAX,
    INT32_MIN,
    RESPONSE_FLAG,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    make_response,
)
from services.remoting.errors import BodyError, RemotingProtocolError

__all__ = ["MAX_EXT_FIELDS", "MAX_FRAME_SIZE", "FrameDecoder", "decode_frame", "decode_header", "decode_payload",
           "encode", "read_mark", "response_frame"]

#: RocketMQ's limit (NettyDecoder's frameMaxLength): a whole frame, length field included.
MAX_FRAME_SIZE = 16 * 1024 * 1024
_MAX_HEADER = 0xFFFFFF  # the mark has 24 bits for the header's length
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_ROCKETMQ_MIN = _FIXED.size + 4 + 4  # and an empty remark and an empty extFields
_JSON_HEADER_DEPTH = 4  # the header and extFields make two levels; room for a field some client adds
#: The most custom header fields a command may carry (RocketMQ's requests carry a few dozen at most).
MAX_EXT_FIELDS = 1024
#: A JSON header longer than this that Python's decoder refuses is refused with the decoder's reason, not
#: read again in Python for a finer one: a header is read on the event loop, so its cost must stay small.
_HEADER_REREAD = 8 * 1024


# ------------------------------------------------------------------------------------------ encoding


def encode(command: RemotingCommand, max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """The whole frame of ``command``. ``ValueError`` if it cannot be written (a ROCKETMQ header's code
    or version beyond int16, a key beyond 32767 bytes, a lone surrogate) or a RocketMQ peer would refuse
    it (more than ``max_frame_size`` bytes)."""
    if command.serialize_type is SerializeType.ROCKETMQ:
        header = _rocketmq_header(command)
    else:
        header = _json_header(command)
    if len(header) > _MAX_HEADER:
        raise ValueError(f"a header of {len(header)} bytes is more than a frame's mark can describe")
    size = 8 + len(header) + len(command.body)
    if size > max_frame_size:
        raise ValueError(f"a frame of {size} bytes is more than the limit of {max_frame_size}")
    mark = command.serialize_type << 24 | len(header)
    return b"".join((_INT32.pack(size - 4), _INT32.pack(mark), header, command.body))


def response_frame(request: RemotingCommand, code: int, ext_fields: dict[str, str]) -> bytes:
    """``encode(make_response(request, code, None, ext_fields))``, byte for byte, without building the
    command: the answer a busy path (a send) writes many thousand times a second. ``ext_fields`` must map
    strings to strings (the caller's own values); a ROCKETMQ-header request takes the general path."""
    if request.serialize_type is not SerializeType.JSON:
        return encode(make_response(request, code, None, ext_fields))
    ext = f'"extFields":{_DUMPS(ext_fields)},' if ext_fields else ""
    text = (f'{{"code":{code},{ext}"flag":{RESPONSE_FLAG},"language":"{_RESPONSE_LANGUAGE}",'
            f'"opaque":{request.opaque},"serializeTypeCurrentRPC":"JSON","version":{DEFAULT_VERSION}}}')
    header = _utf8(text, "the JSON header")
    return b"".join((_INT32.pack(4 + len(header)), _INT32.pack(len(header)), header))


#: The language and version every command made here carries (RemotingCommand's defaults).
_RESPONSE_LANGUAGE = LanguageCode.PYTHON.name


def _json_header(command: RemotingCommand) -> bytes:
    """fastjson's text of the bean: its fields sorted by name, compact. The fields are known, so the text is
    put together in their order around json.dumps (in C) of the strings and of extFields (sorted), which
    writes exactly what fastjson.dumps would, several times faster than building it all here."""
    ext = f'"extFields":{_DUMPS(dict(command.ext_fields))},' if command.ext_fields else ""
    remark = f'"remark":{_DUMPS(command.remark)},' if command.remark is not None else ""
    text = (f'{{"code":{command.code},{ext}"flag":{command.flag},"language":"{command.language.name}",'
            f'"opaque":{command.opaque},{remark}"serializeTypeCurrentRPC":"JSON","version":{command.version}}}')
    return _utf8(text, "the JSON header")


_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode


def _rocketmq_header(command: RemotingCommand) -> bytes:
    for name in ("code", "version"):
        if not -(2**15) <= getattr(command, name) < 2**15:
            raise ValueError(f"{name} {getattr(command, name)} does not fit the ROCKETMQ header's int16")
    remark = _utf8(command.remark or "", "the remark")
    entries = []
    for key, value in sorted(command.ext_fields.items()):
        raw_key, raw_value = _utf8(key, "an extFields key"), _utf8(value, f"extFields[{key!r}]")
        if len(raw_key) >= 2**15:
            raise ValueError(f"extFields key of {len(raw_key)} bytes does not fit an int16 length")
        entries += [_INT16.pack(len(raw_key)), raw_key, _INT32.pack(len(raw_value)), raw_value]
    ext = b"".join(entries)
    fixed = _FIXED.pack(command.code, command.language, command.version, command.opaque, command.flag)
    return b"".join((fixed, _INT32.pack(len(remark)), remark, _INT32.pack(len(ext)), ext))


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} holds a lone surrogate and has no UTF-8 form") from None


# ------------------------------------------------------------------------------------------ decoding


class FrameDecoder:
    """Incremental frame reader for one connection: ``feed`` bytes, get the commands they complete."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        if not 8 <= max_frame_size <= INT32_MAX:
            raise ValueError(f"max_frame_size must be between 8 and {INT32_MAX}")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._payload: int | None = None  # the current frame's length, once its prefix is read
        self._failed: RemotingProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)

    @property
    def idle(self) -> bool:
        """True between frames (no part of a frame held)."""
        return self._payload is None and not self._buf

    @property
    def head_received(self) -> bool:
        """True once the current frame's length, mark and header are in (its body may still be coming)."""
        if self._payload is None or len(self._buf) < 4:
            return False
        header_length: int = _INT32.unpack_from(self._buf)[0] & _MAX_HEADER
        return len(self._buf) >= 4 + header_length

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """The commands completed by ``data`` (possibly none). Raises ``RemotingProtocolError`` on a
        malformed frame, and again on every later call: the stream cannot be resynchronised. Commands
        completed earlier in the same ``data`` are dropped with it, as is the connection."""
        if self._failed is not None:
            raise RemotingProtocolError(f"the stream already failed: {self._failed}")
        try:
            return self._feed(memoryview(data).cast("B"))
        except RemotingProtocolError as exc:
            self._failed, self._buf, self._payload = exc, bytearray(), None
            raise

    def _feed(self, view: memoryview) -> list[RemotingCommand]:
        commands: list[RemotingCommand] = []
        while view:
            if self._payload is None:
                view = self._take(view, 4)
                if len(self._buf) < 4:
                    break
                self._payload = self._check_length(_INT32.unpack(self._buf)[0])
                self._buf.clear()
            need = self._payload
            if not self._buf and len(view) >= need:  # the whole frame is here: no copy into the buffer
                commands.append(decode_payload(view[:need]))
                view = view[need:]
            else:
                view = self._take(view, need)
                if len(self._buf) < need:
                    break
                commands.append(decode_payload(self._buf))
                self._buf = bytearray()
            self._payload = None
        return commands

    def _take(self, view: memoryview, upto: int) -> memoryview:
        count = upto - len(self._buf)
        self._buf += view[:count]
        return view[count:]

    def _check_length(self, length: int) -> int:
        if length < 4:
            raise RemotingProtocolError(f"frame length {length} is less than the 4 bytes of its mark")
        if length + 4 > self.max_frame_size:
            raise RemotingProtocolError(
                f"frame of {length + 4} bytes is more than the limit of {self.max_frame_size}")
        return length


def decode_frame(frame: bytes, max_frame_size: int = MAX_FRAME_SIZE) -> RemotingCommand:
    """The command of exactly one whole frame (length prefix included)."""
    decoder = FrameDecoder(max_frame_size)
    commands = decoder.feed(frame)
    if len(commands) != 1 or not decoder.idle:
        raise RemotingProtocolError(f"expected exactly one whole frame in {len(frame)} bytes")
    return commands[0]


def decode_payload(payload: bytes | bytearray | memoryview) -> RemotingCommand:
    """The command of one frame without its length prefix (mark, header, body)."""
    serialize_type, header_length = read_mark(payload, len(payload) - 4)
    fields = decode_header(serialize_type, bytes(payload[4:4 + header_length]))
    # every field is checked above (ints within int32, extFields strings only): built without a second check
    return RemotingCommand.decoded(**fields, body=bytes(payload[4 + header_length:]), serialize_type=serialize_type)


def read_mark(payload: bytes | bytearray | memoryview, room: int) -> tuple[SerializeType, int]:
    """The serialize type and header length of the mark that starts ``payload``; the header must fit in the
    ``room`` bytes that follow the mark."""
    mark = int.from_bytes(payload[:4], "big")
    kind, header_length = mark >> 24, mark & _MAX_HEADER
    if header_length > room:
        raise RemotingProtocolError(f"header length {header_length} is more than the {room} bytes after the mark")
    try:
        return SerializeType(kind), header_length
    except ValueError:
        raise RemotingProtocolError(f"unknown serialize type {kind} in the frame's mark") from None


def decode_header(serialize_type: SerializeType, header: bytes) -> dict[str, Any]:
    """The command's fields but its body, for ``RemotingCommand.decoded``."""
    if serialize_type is SerializeType.ROCKETMQ:
        return _read_rocketmq_header(header)
    return _read_json_header(header)


# -------------------------------------------------------------------------------- the JSON header


def _read_json_header(raw: bytes) -> dict[str, Any]:
    try:
        doc = fastjson.loads(raw, max_depth=_JSON_HEADER_DEPTH, what="JSON header", fallback_limit=_HEADER_REREAD)
    except BodyError as exc:
        raise RemotingProtocolError(str(exc)) from None
    if not isinstance(doc, dict):
        raise RemotingProtocolError(f"JSON header is {fastjson.describe(doc)}, not an object")
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingProtocolError(f"JSON header field 'remark' is {fastjson.describe(remark)}, not a string")
    _check_serialize_type_field(doc.get("serializeTypeCurrentRPC"))
    return {"code": _json_int(doc, "code", None), "opaque": _json_int(doc, "opaque", None),
            "flag": _json_int(doc, "flag", 0), "version": _json_int(doc, "version", 0),
            "language": _json_language(doc.get("language")), "remark": remark,
            "ext_fields": _json_ext_fields(doc.get("extFields"))}


def _json_int(doc: dict[Any, Any], name: str, default: int | None) -> int:
    value = doc.get(name, default)
    if value is None:
        raise RemotingProtocolError(f"JSON header has no '{name}'")
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingProtocolError(f"JSON header field '{name}' is {fastjson.describe(value)}, not an integer")
    if not INT32_MIN <= value <= INT32_MAX:
        raise RemotingProtocolError(f"JSON header field '{name}' = {value} is outside int32")
    return value


def _json_language(value: object) -> LanguageCode:
    """By name as fastjson writes enums; by number as fastjson also reads them; absent means JAVA, as
    RemotingCommand's default."""
    if value is None:
        return LanguageCode.JAVA
    if isinstance(value, str):
        return LanguageCode.from_name(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return LanguageCode.from_code(value)
    raise RemotingProtocolError(f"JSON header field 'language' is {fastjson.describe(value)}, not a name")


def _check_serialize_type_field(value: object) -> None:
    """Informative only: the frame's mark says how the header is written, as RocketMQ's decoder takes it."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise RemotingProtocolError(
            f"JSON header field 'serializeTypeCurrentRPC' is {fastjson.describe(value)}, not a name")


def _json_ext_fields(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RemotingProtocolError(f"JSON header field 'extFields' is {fastjson.describe(value)}, not an object")
    if len(value) > MAX_EXT_FIELDS:
        raise RemotingProtocolError(f"JSON header has {len(value)} extFields, more than {MAX_EXT_FIELDS}")
    fields: dict[str, str] = {}
    for key, item in value.items():
        if type(key) is str and type(item) is str:  # nearly every field: nothing more to check
            fields[key] = item
            continue
        if not isinstance(key, str):
            raise RemotingProtocolError(f"JSON header extFields key {key!r} is not a string")
        text = _ext_text(key, item)
        if text is not None:
            fields[key] = text
    return fields


def _ext_text(key: str, item: object) -> str | None:
    """An extFields value as fastjson reads it into RocketMQ's ``HashMap<String, String>``: a JSON integer
    or boolean becomes its text (the C++ client writes its int header fields as numbers), and null an
    absent field (RocketMQ reads a null custom field as absent). Nothing else becomes a string."""
    if item is None or isinstance(item, str):
        return item
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    raise RemotingProtocolError(f"JSON header extFields['{key}'] is {fastjson.describe(item)}, not a string")


# ---------------------------------------------------------------------------- the ROCKETMQ header


def _read_rocketmq_header(raw: bytes) -> dict[str, Any]:
    if len(raw) < _ROCKETMQ_MIN:
        raise RemotingProtocolError(f"ROCKETMQ header of {len(raw)} bytes is shorter than {_ROCKETMQ_MIN}")
    code, language, version, opaque, flag = _FIXED.unpack_from(raw, 0)
    remark, pos = _read_string(raw, _FIXED.size, len(raw) - 4, _INT32, "remark")
    (ext_length,) = _INT32.unpack_from(raw, pos)
    pos += 4
    if ext_length < 0:
        raise RemotingProtocolError(f"ROCKETMQ header extFields length {ext_length} is negative")
    if ext_length != len(raw) - pos:
        where = "runs past the header's end" if ext_length > len(raw) - pos else "leaves trailing bytes"
        raise RemotingProtocolError(
            f"ROCKETMQ header extFields length {ext_length} {where} ({len(raw) - pos} bytes left)")
    return {"code": code, "language": LanguageCode.from_code(language), "version": version,
            "opaque": opaque, "flag": flag, "remark": remark or None,
            "ext_fields": _read_ext_fields(raw, pos)}


def _read_ext_fields(raw: bytes, pos: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    seen: set[str] = set()
    while pos < len(raw):
        key, pos = _read_string(raw, pos, len(raw), _INT16, "extFields key")
        value, pos = _read_string(raw, pos, len(raw), _INT32, f"extFields[{key!r}]")
        if key in seen:
            raise RemotingProtocolError(f"ROCKETMQ header repeats extFields key {key!r}")
        if len(seen) >= MAX_EXT_FIELDS:
            raise RemotingProtocolError(f"ROCKETMQ header has more than {MAX_EXT_FIELDS} extFields")
        seen.add(key)
        if key and value:
            fields[key] = value
    return fields


def _read_string(raw: bytes, pos: int, end: int, prefix: struct.Struct, what: str) -> tuple[str, int]:
    """A length-prefixed UTF-8 string that must end by ``end``; returns it and the position after it."""
    if pos + prefix.size > end:
        raise RemotingProtocolError(f"ROCKETMQ header is truncated in the length of {what}")
    (length,) = prefix.unpack_from(raw, pos)
    pos += prefix.size
    if length < 0 or length > end - pos:
        raise RemotingProtocolError(
            f"ROCKETMQ header {what} length {length} is negative or past the header ({end - pos} bytes left)")
    try:
        return raw[pos:pos + length].decode("utf-8"), pos + length
    except UnicodeDecodeError:
        raise RemotingProtocolError(f"ROCKETMQ header {what} is not UTF-8") from None
