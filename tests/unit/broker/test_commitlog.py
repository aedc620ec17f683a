"""CommitLog: records, segments, BLANK padding, reads, replication, truncation and recovery."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from services.broker.commitlog import (
    BLANK_MAGIC,
    LEGACY_MESSAGE_MAGIC,
    MESSAGE_MAGIC,
    MIN_BLANK,
    Blank,
    CommitLog,
    CommitLogCorrupt,
    CommitLogError,
    MessageRecord,
    decode_properties,
    decode_record,
    encode_properties,
    encode_record,
    record_size,
)
from services.broker.record import check_record, encode
from services.common import durable

SEG = 4096
TS = 1_700_000_000_000


def seg_name(start: int) -> str:
    return f"{start:020d}"


def open_log(directory: Path, segment_size: int = SEG) -> CommitLog:
    cl = CommitLog(directory, segment_size)
    cl.open()
    return cl


def body_for(i: int, size: int) -> bytes:
    return bytes((i + k) % 251 for k in range(size))


def fill(cl: CommitLog, count: int, body_size: int = 1000, topic: str = "TopicTest") -> list[tuple[int, int]]:
    """Append ``count`` records; returns their (offset, size)."""
    return [cl.append_message(topic, i % 4, i, TS + i, {"KEYS": f"k{i}", "TAGS": "t"}, body_for(i, body_size))
            for i in range(count)]


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def cl_dir(tmp_path: Path) -> Path:
    return tmp_path / "commitlog"


# --------------------------------------------------------------------------------------------- encoding


class TestEncoding:
    def test_layout_matches_documented_format(self) -> None:
        props = {"KEYS": "k1", "TAGS": "tagA"}
        raw = encode_record("Topic", 3, 7, 1234, TS, props, b"hello")
        props_b = b"KEYS\x01k1\x02TAGS\x01tagA\x02"
        assert len(raw) == 41 + 5 + 2 + len(props_b) + 4 + 5 == record_size("Topic", props, 5)
        total, magic, crc, qid, qoff, phys, ts, tlen = struct.unpack_from(">iIIiqqqB", raw, 0)
        assert (total, magic, crc, qid, qoff, phys, ts, tlen) == (
            len(raw), MESSAGE_MAGIC, zlib.crc32(raw[12:], zlib.crc32(raw[:8])), 3, 7, 1234, TS, 5)
        assert raw[41:46] == b"Topic"
        assert struct.unpack_from(">H", raw, 46)[0] == len(props_b)
        assert raw[48:48 + len(props_b)] == props_b
        assert struct.unpack_from(">i", raw, 48 + len(props_b))[0] == 5
        assert raw.endswith(b"hello")

    def test_round_trip(self) -> None:
        raw = encode_record("T%|_-9", 1, 2, 500, TS, {"KEYS": "a b", "TAGS": "t", "ü": "v"}, b"\x00\xffbody")
        rec = decode_record(b"xx" + raw, 2, 500)
        assert isinstance(rec, MessageRecord)
        assert (rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset, rec.store_timestamp) == (
            "T%|_-9", 1, 2, 500, TS)
        assert rec.properties == {"KEYS": "a b", "TAGS": "t", "ü": "v"}
        assert (rec.keys, rec.tags, rec.body, rec.size) == ("a b", "t", b"\x00\xffbody", len(raw))
        assert rec.next_offset == 500 + len(raw)

    def test_properties_round_trip(self) -> None:
        props = {"KEYS": "k", "x": "", "TAGS": "a||b"}
        assert decode_properties(encode_properties(props)) == props
        assert encode_properties({}) == b""

    def test_wrong_physical_offset_is_not_a_record(self) -> None:
        raw = encode_record("T", 0, 0, 100, TS, {}, b"x")
        assert decode_record(raw, 0, 101) is None

    def test_incomplete_record_is_none(self) -> None:
        raw = encode_record("T", 0, 0, 0, TS, {}, b"body")
        for cut in (0, 3, 7, 8, 40, len(raw) - 1):
            assert decode_record(raw[:cut], 0, 0) is None

    def test_bad_body_crc_is_none(self) -> None:
        raw = bytearray(encode_record("T", 0, 0, 0, TS, {}, b"body"))
        raw[-1] ^= 0xFF
        assert decode_record(bytes(raw), 0, 0) is None

    def test_bad_magic_is_none(self) -> None:
        raw = bytearray(encode_record("T", 0, 0, 0, TS, {}, b"body"))
        raw[4:8] = b"\x00\x00\x00\x01"
        assert decode_record(bytes(raw), 0, 0) is None

    def test_blank(self) -> None:
        blank = struct.pack(">iI", 100, BLANK_MAGIC) + bytes(92)
        rec = decode_record(blank, 0, 0)
        assert isinstance(rec, Blank) and rec.size == 100

    def test_topic_longer_than_127_bytes_refused(self) -> None:
        with pytest.raises(CommitLogError):
            encode_record("t" * 128, 0, 0, 0, TS, {}, b"x")
        assert len(encode_record("t" * 127, 0, 0, 0, TS, {}, b"x")) == record_size("t" * 127, {}, 1)

    def test_corrupt_topic_length_is_none_not_an_exception(self) -> None:
        raw = bytearray(encode_record("T", 0, 0, 0, TS, {}, b"x" * 10))
        raw[40] = 255  # topicLength
        assert decode_record(bytes(raw), 0, 0) is None

    def test_the_crc_covers_every_byte_of_the_record(self) -> None:
        # A body-only CRC let a flipped topic or queue byte move a message to another queue unnoticed.
        raw = encode_record("T", 1, 2, 0, TS, {"KEYS": "k"}, b"body")
        for at in range(len(raw)):
            for bit in (0x01, 0x80):
                damaged = bytearray(raw)
                damaged[at] ^= bit
                assert decode_record(bytes(damaged), 0, 0) is None, (at, bit)

    def test_records_of_older_builds_with_a_body_crc_are_still_read(self) -> None:
        raw = bytearray(encode_record("T", 1, 2, 0, TS, {"KEYS": "k"}, b"body"))
        raw[4:12] = struct.pack(">II", LEGACY_MESSAGE_MAGIC, zlib.crc32(b"body"))
        rec = decode_record(bytes(raw), 0, 0)
        assert isinstance(rec, MessageRecord) and (rec.topic, rec.keys, rec.body) == ("T", "k", b"body")
        raw[-1] ^= 0xFF
        assert decode_record(bytes(raw), 0, 0) is None

    @pytest.mark.parametrize("topic", ["../../../../tmp/x", "a/b", "..", ".", "", "t" * 128, "tópico", "a\x00b",
                                       "T\n"])
    def test_a_record_with_an_invalid_topic_is_not_a_record(self, topic: str) -> None:
        # The topic becomes a directory name under consumequeue/: a CRC-valid record is not enough.
        raw = encode((topic.encode()), b"", 0, 0, 0, TS, b"x")
        assert decode_record(raw, 0, 0) is None
        assert "invalid topic" in str(check_record(raw, 0, 0))

    @pytest.mark.parametrize("props", [b"KEYS\x01k", b"KEYS\x02", b"a\x01b\x01c\x02", b"\xff\x01v\x02", b"\x02"])
    def test_properties_that_do_not_decode_are_refused(self, props: bytes) -> None:
        raw = encode(b"T", props, 0, 0, 0, TS, b"x")
        assert decode_record(raw, 0, 0) is None
        assert "properties" in str(check_record(raw, 0, 0))

    @pytest.mark.parametrize("fields", [(-1, 0, TS), (0, -1, TS), (0, 0, -1)])
    def test_negative_queue_fields_are_refused(self, fields: tuple[int, int, int]) -> None:
        queue_id, queue_offset, ts = fields
        assert decode_record(encode(b"T", b"", queue_id, queue_offset, 0, ts, b"x"), 0, 0) is None


# --------------------------------------------------------------------------------------------- append/read


class TestAppendAndRead:
    def test_empty_log(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        assert (cl.min_offset, cl.max_offset) == (0, 0)
        assert cl.iter_records(0) == []
        assert cl.read_record(0) is None
        assert cl.read(0, 10) == b""
        assert cl.aligned_chunk(0, 100) == b""
        cl.close()

    def test_round_trip_across_segments_with_blank_padding(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        size = record_size("TopicTest", {"KEYS": "k0", "TAGS": "t"}, 1000)
        appended = fill(cl, 10)
        per_seg = (SEG - MIN_BLANK) // size
        assert per_seg == 3
        # The 4th record does not fit after 3: the segment is padded and it starts the next one.
        assert [off for off, _ in appended[:4]] == [0, size, 2 * size, SEG]
        assert all(s == size for _, s in appended)
        for off, _ in appended:
            assert off % SEG + size + MIN_BLANK <= SEG, "a record never spans segments"
        # Padding is a BLANK record filling the rest of segment 0.
        pad = cl.read(3 * size, SEG)
        assert struct.unpack_from(">iI", pad, 0) == (SEG - 3 * size, BLANK_MAGIC)
        assert pad[8:] == bytes(SEG - 3 * size - 8)
        assert segment_files(cl_dir) == [seg_name(0), seg_name(SEG), seg_name(2 * SEG), seg_name(3 * SEG)]
        assert cl.max_offset == appended[-1][0] + size

        for i, (off, _) in enumerate(appended):
            rec = cl.read_record(off)
            assert rec is not None
            assert (rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset) == ("TopicTest", i % 4, i, off)
            assert (rec.store_timestamp, rec.keys, rec.tags, rec.body) == (TS + i, f"k{i}", "t", body_for(i, 1000))
        assert cl.read_record(3 * size) is None  # padding is not a message
        recs = cl.iter_records(0)
        assert [r.physical_offset for r in recs] == [off for off, _ in appended]
        assert [r.queue_offset for r in recs] == list(range(10))
        # Ranges: start/end bounds.
        assert [r.queue_offset for r in cl.iter_records(appended[2][0], appended[5][0])] == [2, 3, 4]
        assert [r.queue_offset for r in cl.iter_records(SEG)] == list(range(3, 10))
        cl.close()

    def test_reopen_preserves_everything(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 10)
        before = [(r.physical_offset, r.body, r.properties) for r in cl.iter_records(0)]
        max_offset = cl.max_offset
        files = {p.name: p.read_bytes() for p in cl_dir.iterdir()}
        cl.close()

        cl = open_log(cl_dir)
        assert cl.max_offset == max_offset
        assert [(r.physical_offset, r.body, r.properties) for r in cl.iter_records(0)] == before
        assert {p.name: p.read_bytes() for p in cl_dir.iterdir()} == files
        # Appending continues at the end.
        off, _ = cl.append_message("TopicTest", 0, 99, TS, {}, b"after")
        assert off == max_offset
        assert cl.read_record(off).body == b"after"  # type: ignore[union-attr]
        assert appended  # silence
        cl.close()

    def test_small_records_fill_segment_exactly(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir, 256)
        size = record_size("T", {}, 20)  # 68
        offs = [cl.append_message("T", 0, i, TS, {}, b"y" * 20)[0] for i in range(6)]
        # 3 records (204) + 8 bytes of blank would be 212 <= 256, a 4th would not fit with its blank.
        assert offs == [0, size, 2 * size, 256, 256 + size, 256 + 2 * size]
        assert [r.queue_offset for r in cl.iter_records(0)] == list(range(6))
        cl.close()

    def test_record_larger_than_segment_refused(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir, 256)
        with pytest.raises(CommitLogError):
            cl.append_message("T", 0, 0, TS, {}, b"x" * 300)
        assert cl.max_offset == 0
        cl.close()

    def test_read_never_crosses_a_segment(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 6)
        assert len(cl.read(SEG - 10, 100)) == 10
        assert len(cl.read(0, 10 * SEG)) == SEG
        assert cl.read(cl.max_offset, 10) == b""
        cl.close()


# --------------------------------------------------------------------------------------------- write_at / replication


class TestWriteAtAndReplication:
    def test_write_at_wrong_offset_raises(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 2)
        end = cl.max_offset
        for bad in (end - 1, end + 1, 0):
            with pytest.raises(CommitLogError):
                cl.write_at(bad, b"xxxx")
        assert cl.max_offset == end
        cl.close()

    def test_write_at_unaligned_offset_on_empty_log_raises(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        for bad in (10, SEG + 10):
            with pytest.raises(CommitLogError):
                cl.write_at(bad, b"x")
        assert (cl.min_offset, cl.max_offset) == (0, 0)
        cl.close()

    def test_empty_replica_may_start_at_masters_oldest_segment(self, tmp_path: Path) -> None:
        master = open_log(tmp_path / "m")
        fill(master, 9)
        master.close()
        (tmp_path / "m" / seg_name(0)).unlink()  # the master's oldest data now starts at SEG
        master = open_log(tmp_path / "m")
        slave = open_log(tmp_path / "s")
        offset = master.min_offset
        while offset < master.max_offset:
            chunk = master.aligned_chunk(offset, 3000)
            slave.write_at(offset, chunk)
            offset += len(chunk)
        assert (slave.min_offset, slave.max_offset) == (SEG, master.max_offset)
        assert segment_files(tmp_path / "s") == segment_files(tmp_path / "m")
        with pytest.raises(CommitLogError):  # no longer empty: must continue at the end
            slave.write_at(SEG, b"x")
        master.close()
        slave.close()
        slave = open_log(tmp_path / "s")
        assert (slave.min_offset, slave.max_offset) == (SEG, offset)
        assert [r.queue_offset for r in slave.iter_records(SEG)] == list(range(3, 9))
        slave.close()

    @pytest.mark.parametrize("max_bytes", [1, 500, 2500, 100_000])
    def test_replication_produces_byte_identical_segments(self, tmp_path: Path, max_bytes: int) -> None:
        master = open_log(tmp_path / "master")
        fill(master, 5, body_size=1000)
        fill(master, 20, body_size=37, topic="Small")
        fill(master, 4, body_size=1500, topic="Big")
        master.flush()
        slave = open_log(tmp_path / "slave")
        offset = 0
        chunks = 0
        while offset < master.max_offset:
            chunk = master.aligned_chunk(offset, max_bytes)
            assert chunk, f"no progress at {offset}"
            slave.write_at(offset, chunk)
            offset += len(chunk)
            chunks += 1
        assert slave.max_offset == master.max_offset
        slave.flush()
        master_files = {p.name: p.read_bytes() for p in (tmp_path / "master").iterdir()}
        slave_files = {p.name: p.read_bytes() for p in (tmp_path / "slave").iterdir()}
        assert master_files == slave_files
        assert len(master_files) >= 3
        assert [r.body for r in slave.iter_records(0)] == [r.body for r in master.iter_records(0)]
        master.close()
        slave.close()
        reopened = open_log(tmp_path / "slave")
        assert reopened.max_offset == offset
        reopened.close()

    def test_slave_continues_appending_after_replication(self, tmp_path: Path) -> None:
        master = open_log(tmp_path / "m")
        fill(master, 3)
        slave = open_log(tmp_path / "s")
        off = 0
        while off < master.max_offset:
            chunk = master.aligned_chunk(off, 10_000)
            slave.write_at(off, chunk)
            off += len(chunk)
        # A promoted slave appends its own records at the end, padding as the master would.
        a = master.append_message("T", 0, 0, TS, {}, b"z" * 1000)
        b = slave.append_message("T", 0, 0, TS, {}, b"z" * 1000)
        assert a == b == (SEG, a[1])
        master.close()
        slave.close()


# --------------------------------------------------------------------------------------------- aligned_chunk


def assert_whole_records(cl: CommitLog, offset: int, chunk: bytes) -> None:
    pos = 0
    while pos < len(chunk):
        rec = decode_record(chunk, pos, offset + pos)
        assert rec is not None, f"partial or corrupt record at {offset + pos}"
        pos += rec.size
    assert pos == len(chunk)


class TestAlignedChunk:
    def test_never_returns_a_partial_record(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 5, body_size=1000)
        fill(cl, 10, body_size=200, topic="Other")
        starts = [r.physical_offset for r in cl.iter_records(0)]
        pad_start = starts[2] + cl.read_record(starts[2]).size  # type: ignore[union-attr]
        boundaries = sorted(set(starts) | {pad_start})
        for offset in boundaries:
            for max_bytes in (1, 47, 300, 1047, 1100, 2100, 5000):
                for limit in (None, offset + 1, offset + 500, offset + 1500, offset + 2500):
                    chunk = cl.aligned_chunk(offset, max_bytes, limit)
                    assert_whole_records(cl, offset, chunk)
                    seg_end = offset - offset % SEG + SEG
                    assert offset + len(chunk) <= seg_end, "never crosses a segment end"
                    if limit is not None:
                        assert offset + len(chunk) <= limit
                    if len(chunk) > max_bytes:
                        # Only a single oversized record may exceed max_bytes.
                        first = decode_record(chunk, 0, offset)
                        assert first is not None and first.size == len(chunk)
        cl.close()

    def test_single_record_larger_than_max_bytes_is_returned_whole(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        (off, size), _ = fill(cl, 2)
        chunk = cl.aligned_chunk(off, 10)
        assert len(chunk) == size
        cl.close()

    def test_limit_inside_a_record_stops_before_it(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        (a, size), (b, _), _ = fill(cl, 3)
        assert cl.aligned_chunk(a, 100_000, limit=b + 10) == cl.read(a, size)
        assert cl.aligned_chunk(a, 100_000, limit=a + size - 1) == b""
        assert cl.aligned_chunk(a, 100_000, limit=a) == b""
        cl.close()

    def test_stops_at_segment_end_including_padding(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 5)
        chunk = cl.aligned_chunk(0, 100_000)
        assert len(chunk) == SEG
        blank = decode_record(chunk, 3 * record_size("TopicTest", {"KEYS": "k0", "TAGS": "t"}, 1000),
                              0)
        assert isinstance(blank, Blank)
        nxt = cl.aligned_chunk(SEG, 100_000)
        assert len(nxt) == cl.max_offset - SEG
        assert cl.aligned_chunk(cl.max_offset, 100) == b""
        cl.close()


# --------------------------------------------------------------------------------------------- truncate


class TestTruncate:
    def test_truncate_inside_earlier_segment_deletes_later_files(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 10)
        assert len(segment_files(cl_dir)) == 4
        cut = appended[1][0]
        cl.truncate(cut)
        # Durable before close: later segment files are gone and the containing one is cut on disk.
        assert segment_files(cl_dir) == [seg_name(0)]
        assert os.path.getsize(cl_dir / seg_name(0)) == cut
        assert cl.max_offset == cut
        assert [r.queue_offset for r in cl.iter_records(0)] == [0]
        assert cl.read_record(appended[2][0]) is None
        cl.close()

        cl = open_log(cl_dir)
        assert cl.max_offset == cut
        assert [r.queue_offset for r in cl.iter_records(0)] == [0]
        off, _ = cl.append_message("TopicTest", 0, 1, TS, {}, b"new")
        assert off == cut
        assert cl.read_record(cut).body == b"new"  # type: ignore[union-attr]
        cl.close()

    def test_truncate_at_segment_boundary(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 10)
        cl.truncate(SEG)
        assert segment_files(cl_dir) == [seg_name(0)]
        assert cl.max_offset == SEG
        cl.close()
        cl = open_log(cl_dir)
        assert cl.max_offset == SEG
        assert len(cl.iter_records(0)) == 3
        off, _ = cl.append_message("T", 0, 0, TS, {}, b"x")
        assert off == SEG
        assert segment_files(cl_dir) == [seg_name(0), seg_name(SEG)]
        cl.close()

    def test_truncate_to_zero(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 7)
        cl.truncate(0)
        assert cl.max_offset == 0 and cl.iter_records(0) == []
        cl.close()
        cl = open_log(cl_dir)
        assert cl.max_offset == 0
        assert cl.append_message("T", 0, 0, TS, {}, b"x")[0] == 0
        cl.close()

    def test_truncate_at_or_beyond_end_is_a_no_op(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 2)
        end = cl.max_offset
        cl.truncate(end)
        cl.truncate(end + 1000)
        assert cl.max_offset == end and len(cl.iter_records(0)) == 2
        cl.close()

    def test_truncate_below_oldest_data_raises(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 8)
        cl.close()
        (cl_dir / seg_name(0)).unlink()  # as if expired
        cl = open_log(cl_dir)
        assert cl.min_offset == SEG
        with pytest.raises(CommitLogError):
            cl.truncate(100)
        cl.close()


    def test_the_segment_keeps_its_blocks_reserved(self, cl_dir: Path) -> None:
        """Appends never wait for block allocation (durable.reserve): a new segment, a truncated one
        and the last one after a restart have their blocks reserved; the size is only what is written.
        (Where the platform cannot reserve blocks, only the sizes are checked.)"""
        seg_size = 2**20

        def reserved(cl: CommitLog) -> int:
            return seg_size if durable._fallocate is None else os.fstat(cl.segments[-1].fd).st_blocks * 512

        cl = open_log(cl_dir, seg_size)
        appended = fill(cl, 5)
        assert os.path.getsize(cl_dir / seg_name(0)) == cl.max_offset and reserved(cl) >= seg_size
        cl.truncate(appended[2][0])
        assert os.path.getsize(cl_dir / seg_name(0)) == appended[2][0] and reserved(cl) >= seg_size
        cl.close()
        os.truncate(cl_dir / seg_name(0), appended[2][0])  # drops the reservation, as a copied file has none
        cl = open_log(cl_dir, seg_size)
        assert cl.max_offset == appended[2][0] and reserved(cl) >= seg_size
        cl.close()


# --------------------------------------------------------------------------------------------- recovery


class TestRecovery:
    def test_torn_tail_cut_at_last_whole_record(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 8)
        cl.close()
        last_off, last_size = appended[-1]
        last_seg = cl_dir / seg_name(last_off - last_off % SEG)
        for torn_len in (last_size - 1, 10, 5):
            with open(last_seg, "r+b") as f:
                f.truncate(last_off % SEG + torn_len)
            cl = open_log(cl_dir)
            assert cl.max_offset == last_off
            assert os.path.getsize(last_seg) == last_off % SEG
            assert [r.queue_offset for r in cl.iter_records(0)] == list(range(7))
            off, _ = cl.append_message("TopicTest", 3, 7, TS, {}, b"again")
            assert off == last_off
            cl.close()
            cl = open_log(cl_dir)
            assert cl.read_record(last_off).body == b"again"  # type: ignore[union-attr]
            cl.close()

    def test_torn_padding_is_cut_and_rewritten(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 3)
        cl.close()
        end3 = appended[-1][0] + appended[-1][1]
        # Crash while padding: BLANK header written, zeroes incomplete, no next segment yet.
        with open(cl_dir / seg_name(0), "r+b") as f:
            f.seek(end3)
            f.write(struct.pack(">iI", SEG - end3, BLANK_MAGIC) + bytes(20))
        cl = open_log(cl_dir)
        assert cl.max_offset == end3
        off, _ = cl.append_message("TopicTest", 0, 3, TS, {}, b"x" * 1000)
        assert off == SEG
        assert os.path.getsize(cl_dir / seg_name(0)) == SEG
        cl.close()

    def test_full_segment_with_missing_next_file_is_kept(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 4)
        cl.close()
        (cl_dir / seg_name(SEG)).unlink()
        cl = open_log(cl_dir)
        assert cl.max_offset == SEG
        assert len(cl.iter_records(0)) == 3
        cl.close()

    def test_empty_last_segment_file(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 4)
        cl.close()
        with open(cl_dir / seg_name(SEG), "r+b") as f:
            f.truncate(0)
        cl = open_log(cl_dir)
        assert cl.max_offset == SEG
        assert cl.append_message("T", 0, 0, TS, {}, b"x")[0] == SEG
        assert appended
        cl.close()

    def test_corrupt_body_crc_of_last_record_is_cut(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 8)
        cl.close()
        last_off, last_size = appended[-1]
        path = cl_dir / seg_name(last_off - last_off % SEG)
        data = bytearray(path.read_bytes())
        data[last_off % SEG + last_size - 1] ^= 0x55  # last body byte
        path.write_bytes(bytes(data))
        cl = open_log(cl_dir)
        assert cl.max_offset == last_off
        assert [r.queue_offset for r in cl.iter_records(0)] == list(range(7))
        cl.close()

    def test_corruption_in_the_middle_of_last_segment_is_refused_and_nothing_is_cut(self, cl_dir: Path) -> None:
        # It used to cut the log there, dropping the 12 intact records after it.
        cl = open_log(cl_dir)
        fill(cl, 4)  # segment 0 full, segment 1 begins
        small = fill(cl, 20, body_size=60, topic="Small")
        cl.close()
        in_last = [(off, size) for off, size in small if off >= SEG]
        assert len(in_last) == 20
        bad_off, bad_size = in_last[7]
        path = cl_dir / seg_name(SEG)
        data = bytearray(path.read_bytes())
        data[bad_off - SEG + bad_size - 30] ^= 0xFF  # inside the body of the 8th small record
        path.write_bytes(bytes(data))
        with pytest.raises(CommitLogCorrupt) as err:
            open_log(cl_dir)
        assert str(path) in str(err.value) and f"offset {bad_off}:" in str(err.value)
        assert f"valid records follow at offset {in_last[8][0]}" in str(err.value)
        assert (err.value.path, err.value.offset) == (str(path), bad_off)
        assert path.read_bytes() == bytes(data)  # nothing removed

    def test_corruption_in_an_earlier_recent_segment_is_refused_and_later_segments_stay(self, cl_dir: Path) -> None:
        # It used to delete the whole last segment.
        cl = open_log(cl_dir)
        appended = fill(cl, 9)  # segments 0, 1, 2
        cl.close()
        victim_off, _ = appended[4]  # second record of segment 1
        path = cl_dir / seg_name(SEG)
        data = bytearray(path.read_bytes())
        data[victim_off - SEG + 100] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(CommitLogCorrupt, match=f"offset {victim_off}: .*valid records follow"):
            open_log(cl_dir)
        assert segment_files(cl_dir) == [seg_name(0), seg_name(SEG), seg_name(2 * SEG)]

    def test_the_only_record_of_the_last_segment_damaged_with_later_data_missing_is_a_torn_tail(
            self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 8)
        cl.close()
        last_off, last_size = appended[-1]
        path = cl_dir / seg_name(last_off - last_off % SEG)
        with open(path, "r+b") as f:  # the unflushed tail of a power loss: zeroes
            f.seek(last_off % SEG + 10)
            f.write(bytes(last_size - 10))
        cl = open_log(cl_dir)
        assert cl.max_offset == last_off
        cl.close()

    def test_damage_below_the_flushed_offset_is_refused_even_at_the_end(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 8)
        flushed = cl.flush()
        cl.close()
        last_off, last_size = appended[-1]
        path = cl_dir / seg_name(last_off - last_off % SEG)
        data = bytearray(path.read_bytes())
        data[last_off % SEG + last_size - 1] ^= 0x55
        path.write_bytes(bytes(data))
        cl = CommitLog(cl_dir, SEG)
        with pytest.raises(CommitLogCorrupt, match=f"offset {last_off}: CRC mismatch, in data that had been flushed"):
            cl.open(flushed=flushed)
        assert path.read_bytes() == bytes(data)

    @pytest.mark.parametrize("cut", [1, 500, 4000])
    def test_a_log_shorter_than_what_was_flushed_is_refused(self, cl_dir: Path, cut: int) -> None:
        cl = open_log(cl_dir)
        fill(cl, 8)
        flushed = cl.flush()
        cl.close()
        last = cl_dir / seg_name(flushed - flushed % SEG)
        os.truncate(last, max(0, last.stat().st_size - cut))
        cl = CommitLog(cl_dir, SEG)
        with pytest.raises(CommitLogCorrupt, match=f"checkpoint says {flushed} bytes had been flushed"):
            cl.open(flushed=flushed)

    def test_an_old_segment_that_lost_bytes_is_refused(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 16)  # 6 segments; only the last 3 are scanned
        cl.close()
        os.truncate(cl_dir / seg_name(SEG), SEG - 100)
        with pytest.raises(CommitLogCorrupt, match=f"{seg_name(SEG)} is damaged .* holds {SEG - 100} bytes"):
            open_log(cl_dir)

    def test_a_segment_longer_than_the_segment_size_is_refused(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 8)
        cl.close()
        with open(cl_dir / seg_name(SEG), "ab") as f:
            f.write(b"\x00" * 10)
        with pytest.raises(CommitLogCorrupt, match="longer than mappedFileSizeCommitLog"):
            open_log(cl_dir)

    def test_garbage_after_last_record_is_cut(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 2)
        end = cl.max_offset
        cl.close()
        with open(cl_dir / seg_name(0), "ab") as f:
            f.write(b"\x00" * 30)
        cl = open_log(cl_dir)
        assert cl.max_offset == end
        cl.close()

    def test_corrupt_header_of_last_record_is_cut_not_fatal(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        appended = fill(cl, 3, body_size=50)
        cl.close()
        last_off, _ = appended[-1]
        path = cl_dir / seg_name(0)
        data = bytearray(path.read_bytes())
        data[last_off + 40] = 255  # topicLength
        path.write_bytes(bytes(data))
        cl = CommitLog(cl_dir, SEG)
        cl.open()
        assert cl.max_offset == last_off
        cl.close()

    def test_non_contiguous_segments_refused(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 8)
        cl.close()
        (cl_dir / seg_name(SEG)).unlink()
        with pytest.raises(CommitLogError):
            open_log(cl_dir)

    def test_changed_segment_size_refused(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 8)
        cl.close()
        with pytest.raises(CommitLogError):
            open_log(cl_dir, 2 * SEG)

    def test_non_segment_files_ignored(self, cl_dir: Path) -> None:
        cl = open_log(cl_dir)
        fill(cl, 2)
        end = cl.max_offset
        cl.close()
        (cl_dir / "README").write_text("x")
        (cl_dir / "123").write_text("x")
        cl = open_log(cl_dir)
        assert cl.max_offset == end
        cl.close()


# ---------------------------------------------------------------------- batched appends and the index scan
def test_batch_append_is_byte_identical_to_one_by_one(tmp_path: Path) -> None:
    """One write per batch, the same bytes as appending each record in turn, padding included."""
    from services.broker.commitlog import NewRecord

    specs = [NewRecord("TopicTest", i % 4, i, TS + i, {"KEYS": f"k{i}", "TAGS": "t"}, body_for(i, 900))
             for i in range(12)]  # crosses two segment ends
    single = open_log(tmp_path / "single")
    one_by_one = [single.append_message(r.topic, r.queue_id, r.queue_offset, r.timestamp, r.properties, r.body)
                  for r in specs]
    batched = open_log(tmp_path / "batched")
    assert batched.append_batch(specs) == one_by_one
    assert batched.max_offset == single.max_offset
    assert sorted(os.listdir(tmp_path / "batched")) == sorted(os.listdir(tmp_path / "single"))
    for name in os.listdir(tmp_path / "single"):
        assert (tmp_path / "batched" / name).read_bytes() == (tmp_path / "single" / name).read_bytes()


def test_batch_with_a_bad_record_writes_nothing(tmp_path: Path) -> None:
    from services.broker.commitlog import NewRecord

    cl = open_log(tmp_path)
    fill(cl, 2)
    end = cl.max_offset
    with pytest.raises(CommitLogError):
        cl.append_batch([NewRecord("T", 0, 0, TS, {}, b"ok"), NewRecord("T", 0, 1, TS, {}, bytes(SEG))])
    assert cl.max_offset == end
    assert len(cl.iter_records(0)) == 2


def test_index_scan_agrees_with_full_decoding(tmp_path: Path) -> None:
    cl = open_log(tmp_path)
    cl.append_message("A", 0, 0, TS, {}, b"no properties")
    cl.append_message("B", 1, 0, TS, {"MYTAGS": "not-tags", "KEYS": "k"}, b"tags-like key")
    cl.append_message("C", 2, 0, TS, {"KEYS": "k", "TAGS": "red"}, b"tags last")
    fill(cl, 6)
    full = [(r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size, r.tags) for r in cl.iter_records(0)]
    assert cl.iter_index(0) == full
    assert [e[5] for e in full[:3]] == ["", "", "red"]


def test_index_scan_names_a_corrupt_body_instead_of_stopping_silently(tmp_path: Path) -> None:
    # A silent stop left consumers waiting forever at that queue offset.
    cl = open_log(tmp_path)
    placed = fill(cl, 3, body_size=200)
    offset, size = placed[1]
    os.pwrite(cl.segments[0].fd, b"\xff", offset + size - 1)  # flip the last body byte
    for scan in (cl.iter_index, cl.iter_records):
        with pytest.raises(CommitLogCorrupt, match=f"{seg_name(0)} is damaged at offset {offset}: CRC mismatch"):
            scan(0)
    assert cl.check_at(offset) == "CRC mismatch" and cl.read_record(offset) is None
    cl.close()


def test_a_scan_that_ends_inside_a_record_stops_before_it(tmp_path: Path) -> None:
    cl = open_log(tmp_path)
    placed = fill(cl, 3, body_size=200)
    end = placed[1][0] + 50
    assert [e[3] for e in cl.iter_index(0, end)] == [placed[0][0]]
    cl.close()


def test_scrub_lists_every_damaged_record_of_every_segment(tmp_path: Path) -> None:
    cl = open_log(tmp_path)
    placed = fill(cl, 16)  # 6 segments
    cl.close()
    victims = [placed[1][0], placed[5][0], placed[14][0]]
    for off in victims:
        path = tmp_path / seg_name(off - off % SEG)
        data = bytearray(path.read_bytes())
        data[off % SEG + 300] ^= 0x10
        path.write_bytes(bytes(data))
    cl = CommitLog(tmp_path, SEG)
    cl.open(recover=False)
    found = list(cl.scrub())
    cl.close()
    assert [(d.offset, d.reason) for d in found] == [(v, "CRC mismatch") for v in victims]
    assert found[0].path == tmp_path / seg_name(0)
