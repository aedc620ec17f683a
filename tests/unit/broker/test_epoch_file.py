"""EpochFileCache: RocketMQ's EpochFileCacheTest and CheckpointFileTest, plus our documented differences."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.epoch_file import (
    MAX_OFFSET,
    EpochEntry,
    EpochFileCache,
    EpochFileDamaged,
    decode_epoch_file,
    encode_epoch_file,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "EpochCheckpoint"


@pytest.fixture
def cache(path: Path) -> EpochFileCache:
    """EpochFileCacheTest.setup: appends (1,100), (2,300), (3,500)."""
    c = EpochFileCache(path)
    assert c.append(1, 100)
    assert c.append(2, 300)
    assert c.append(3, 500)
    assert c.get(2) == EpochEntry(2, 300, 500)
    return c


def cache_of(*pairs: tuple[int, int]) -> EpochFileCache:
    c = EpochFileCache()
    for epoch, start in pairs:
        assert c.append(epoch, start)
    return c


# ------------------------------------------------------------------------------------- EpochFileCacheTest


class TestEpochFileCacheTest:
    def test_init_from_file(self, cache: EpochFileCache, path: Path) -> None:
        loaded = EpochFileCache(path)
        assert loaded.load() is True
        assert loaded.get(2) == EpochEntry(2, 300, 500)
        assert loaded.entries() == [EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500)]

    def test_truncate(self, cache: EpochFileCache) -> None:
        cache.truncate_suffix_by_offset(150)
        assert cache.get(1) is not None
        assert cache.get(2) is None
        assert cache.get(3) is None

    def test_find_epoch_entry_by_offset(self, cache: EpochFileCache) -> None:
        assert cache.find_by_offset(350) == EpochEntry(2, 300, 500)

    def test_find_consistent_point_sample1(self, cache: EpochFileCache) -> None:
        other = cache_of((1, 100), (2, 300), (3, 450))
        assert cache.find_consistent_point(other) == 450

    def test_find_consistent_point_sample2(self, cache: EpochFileCache) -> None:
        other = cache_of((1, 100), (2, 300), (3, 500))
        cache.set_last_end(700)
        other.set_last_end(600)
        assert cache.find_consistent_point(other) == 600

    def test_find_consistent_point_sample3(self, cache: EpochFileCache) -> None:
        other = cache_of((1, 200), (2, 500))
        assert cache.find_consistent_point(other) == -1

    def test_find_consistent_point_sample4(self, cache: EpochFileCache) -> None:
        other = cache_of((1, 100), (2, 300), (3, 500), (4, 800))
        cache.set_last_end(700)
        assert other.find_consistent_point(cache) == 700


# ------------------------------------------------------------------------------------- CheckpointFileTest


class TestCheckpointFile:
    def test_known_crc(self) -> None:
        entries = [EpochEntry(7, 7000), EpochEntry(8, 8000)]
        assert encode_epoch_file(entries) == "2\n773307083\n7-7000\n8-8000\n"
        assert decode_epoch_file("2\n773307083\n7-7000\n8-8000\n") == [(7, 7000), (8, 8000)]

    def test_file_text_on_disk(self, path: Path) -> None:
        c = EpochFileCache(path)
        c.init_from_entries([EpochEntry(7, 7000), EpochEntry(8, 8000)])
        assert path.read_text() == "2\n773307083\n7-7000\n8-8000\n"

    def test_normal_write_and_read(self, path: Path) -> None:
        entries = [EpochEntry(7, 7000, 8000), EpochEntry(8, 8000)]
        for _ in range(2):
            EpochFileCache(path).init_from_entries(entries)
            loaded = EpochFileCache(path)
            assert loaded.load()
            assert loaded.entries() == entries

    def test_abnormal_write_and_read_from_bak(self, path: Path) -> None:
        entries = [EpochEntry(7, 7000, 8000), EpochEntry(8, 8000)]
        EpochFileCache(path).init_from_entries(entries)
        EpochFileCache(path).init_from_entries(entries)
        bak = path.with_name(path.name + ".bak")
        assert bak.exists()
        path.unlink()
        loaded = EpochFileCache(path)
        assert loaded.load()
        assert loaded.entries() == entries


# ------------------------------------------------------------------------------------- file format and load


class TestFileFormat:
    def test_bak_holds_previous_version(self, path: Path) -> None:
        c = EpochFileCache(path)
        c.append(1, 0)
        c.append(2, 100)
        bak = path.with_name(path.name + ".bak")
        assert decode_epoch_file(bak.read_text()) == [(1, 0)]
        assert decode_epoch_file(path.read_text()) == [(1, 0), (2, 100)]

    def test_crc_mismatch_in_the_newest_entry_is_refused_not_replaced_by_the_bak(
            self, cache: EpochFileCache, path: Path) -> None:
        # The .bak lacks epoch 3: falling back used to lose it with only a warning.
        path.write_text(path.read_text().replace("3-500", "3-501"))
        with pytest.raises(EpochFileDamaged, match=f"{path} is damaged and it still shows entries its .bak "
                                                   "lacks: 3-501"):
            EpochFileCache(path).load()

    def test_count_larger_than_the_bak_is_refused(self, cache: EpochFileCache, path: Path) -> None:
        text = path.read_text()
        path.write_text(text[:text.index("3-500")])  # the newest line lost, the count says 3
        with pytest.raises(EpochFileDamaged, match="it held 3 entries and its .bak only 2"):
            EpochFileCache(path).load()

    def test_damage_that_hides_nothing_the_bak_lacks_falls_back_and_repairs_the_file(
            self, cache: EpochFileCache, path: Path, caplog: pytest.LogCaptureFixture) -> None:
        cache.truncate_suffix_by_epoch(3)  # main: epochs 1, 2; .bak: 1, 2, 3
        path.write_text(path.read_text().replace("\n", "\n\n", 1))  # an extra line: count and CRC still read
        loaded = EpochFileCache(path)
        with caplog.at_level("ERROR"):
            assert loaded.load()
        assert [e.epoch for e in loaded.entries()] == [1, 2, 3]  # the .bak: nothing the main file held is lost
        assert str(path) in caplog.text
        assert decode_epoch_file(path.read_text()) == [(1, 100), (2, 300), (3, 500)]  # rewritten

    @pytest.mark.parametrize("forged", ["2\n0\n7-7000\n8-8000\n", "1\n0\n999999-0\n"])
    def test_crc_zero_is_checked_like_any_other(self, forged: str) -> None:
        # RocketMQ skips the check for a CRC of 0; a forged epoch 999999 was accepted that way.
        assert decode_epoch_file(forged) is None
        assert decode_epoch_file("0\n0\n") == []  # 0 is the real CRC of an empty list

    def test_forged_epoch_with_crc_zero_is_not_loaded(self, path: Path) -> None:
        c = EpochFileCache(path)
        c.append(1, 0)
        c.append(2, 100)
        path.write_text("3\n0\n1-0\n2-100\n999999-200\n")
        with pytest.raises(EpochFileDamaged):
            EpochFileCache(path).load(log_has_data=True)

    def test_lines_that_are_not_entries_make_the_file_damaged(self) -> None:
        text = encode_epoch_file([EpochEntry(7, 7000), EpochEntry(8, 8000)])
        crc = text.split("\n")[1]
        assert decode_epoch_file(f"2\n{crc}\n7-7000\ngarbage\n8-8000\n") is None
        assert decode_epoch_file(f"2\n{crc}\n7-7000\n8-8000") is None  # the last line without its newline
        assert decode_epoch_file(f"2\n{crc}\n 7-7000\n8-8000\n") is None

    @pytest.mark.parametrize("pairs", [[(2, 0), (1, 100)], [(1, 100), (2, 50)], [(1, 0), (1, 0)],
                                       [(2**31, 0)], [(1, 2**63)]])
    def test_entries_out_of_order_or_range_make_the_file_damaged(self, pairs: list[tuple[int, int]]) -> None:
        assert decode_epoch_file(encode_epoch_file([EpochEntry(e, s) for e, s in pairs])) is None

    def test_unparseable_header(self) -> None:
        assert decode_epoch_file("") is None
        assert decode_epoch_file("x\n1\n") is None

    def test_both_files_corrupt_load_fails(self, path: Path) -> None:
        path.write_text("garbage")
        path.with_name(path.name + ".bak").write_text("more garbage")
        c = EpochFileCache(path)
        assert c.load() is False
        assert c.entries() == []

    def test_main_corrupt_and_no_bak_load_fails(self, path: Path) -> None:
        path.write_text("3\n12345\n1-0\n")
        assert EpochFileCache(path).load() is False
        with pytest.raises(EpochFileDamaged, match="its .bak is missing or damaged too"):
            EpochFileCache(path).load(log_has_data=True)

    def test_the_bak_is_written_from_what_the_main_file_held(self, path: Path) -> None:
        c = EpochFileCache(path)
        c.append(1, 0)
        path.write_text("garbage")  # damaged after it was written: never copied into the .bak
        c.append(2, 100)
        assert decode_epoch_file(path.with_name(path.name + ".bak").read_text()) == [(1, 0)]

    def test_no_file_is_an_empty_cache(self, path: Path) -> None:
        c = EpochFileCache(path)
        assert c.load() is True
        assert c.entries() == [] and c.last_epoch() == -1
        assert not path.exists()

    def test_no_path_writes_nothing(self, tmp_path: Path) -> None:
        c = EpochFileCache()
        assert c.load()
        assert c.append(1, 0)
        c.init_from_entries([EpochEntry(1, 0), EpochEntry(2, 10)])
        assert c.entries() == [EpochEntry(1, 0, 10), EpochEntry(2, 10)]
        assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------- operations


class TestOperations:
    def test_append_rules(self) -> None:
        c = cache_of((1, 100))
        assert c.append(1, 200) is False  # same epoch
        assert c.append(0, 200) is False  # lower epoch
        assert c.append(2, 50) is False  # start goes back
        assert c.entries() == [EpochEntry(1, 100)]
        assert c.append(2, 200)
        assert c.entries() == [EpochEntry(1, 100, 200), EpochEntry(2, 200)]

    def test_higher_epoch_may_start_at_same_offset(self, path: Path) -> None:
        """Deliberate difference (issue #9689): a re-elected master with no new data records its epoch."""
        c = EpochFileCache(path)
        assert c.append(1, 100)
        assert c.append(2, 100)
        assert c.entries() == [EpochEntry(1, 100, 100), EpochEntry(2, 100)]
        assert c.last_epoch() == 2
        # The empty epoch never matches an offset.
        assert c.find_by_offset(100) == EpochEntry(2, 100)
        loaded = EpochFileCache(path)
        assert loaded.load()
        assert loaded.entries() == c.entries()

    def test_empty_list_is_written(self, cache: EpochFileCache, path: Path) -> None:
        """Deliberate difference: truncating every entry writes an empty file, not a no-op."""
        cache.truncate_suffix_by_epoch(1)
        assert cache.entries() == []
        assert path.read_text() == "0\n0\n"
        loaded = EpochFileCache(path)
        assert loaded.load() is True
        assert loaded.entries() == []  # not resurrected from .bak

    def test_truncate_suffix_resets_last_end_in_memory(self, cache: EpochFileCache) -> None:
        """Deliberate difference: RocketMQ resets a copy; here the in-memory last entry is open-ended."""
        cache.truncate_suffix_by_epoch(3)
        assert cache.last_entry() == EpochEntry(2, 300, MAX_OFFSET)
        assert cache.find_by_offset(10_000) == EpochEntry(2, 300, MAX_OFFSET)
        cache.truncate_suffix_by_offset(300)
        assert cache.entries() == [EpochEntry(1, 100, MAX_OFFSET)]

    def test_truncate_suffix_by_epoch_and_offset(self, cache: EpochFileCache, path: Path) -> None:
        cache.truncate_suffix_by_epoch(2)
        assert [e.epoch for e in cache.entries()] == [1]
        loaded = EpochFileCache(path)
        loaded.load()
        assert loaded.entries() == [EpochEntry(1, 100)]

    def test_truncate_suffix_by_offset_boundaries(self, cache: EpochFileCache) -> None:
        cache.truncate_suffix_by_offset(501)  # nothing starts at/after 501
        assert len(cache.entries()) == 3
        cache.truncate_suffix_by_offset(500)  # removes the entry starting at 500
        assert [e.epoch for e in cache.entries()] == [1, 2]

    def test_truncate_prefix_by_offset(self, cache: EpochFileCache, path: Path) -> None:
        cache.truncate_prefix_by_offset(299)
        assert [e.epoch for e in cache.entries()] == [1, 2, 3]
        cache.truncate_prefix_by_offset(300)  # removes entries whose end <= 300
        assert [e.epoch for e in cache.entries()] == [2, 3]
        loaded = EpochFileCache(path)
        loaded.load()
        assert [e.epoch for e in loaded.entries()] == [2, 3]

    def test_set_last_end(self, cache: EpochFileCache) -> None:
        cache.set_last_end(400)  # below the last start: ignored
        assert cache.last_entry() == EpochEntry(3, 500)
        cache.set_last_end(500)
        assert cache.last_entry() == EpochEntry(3, 500, 500)
        cache.set_last_end(900)
        assert cache.last_entry() == EpochEntry(3, 500, 900)
        assert cache.find_by_offset(900) is None
        EpochFileCache().set_last_end(10)  # empty: no error

    def test_queries(self, cache: EpochFileCache) -> None:
        assert cache.first_entry() == EpochEntry(1, 100, 300)
        assert cache.last_entry() == EpochEntry(3, 500)
        assert cache.last_epoch() == 3
        assert cache.next_entry(1) == EpochEntry(2, 300, 500)
        assert cache.next_entry(0) == EpochEntry(1, 100, 300)
        assert cache.next_entry(3) is None
        assert cache.get(4) is None
        assert cache.find_by_offset(99) is None
        assert cache.find_by_offset(100) == EpochEntry(1, 100, 300)
        assert cache.find_by_offset(299) == EpochEntry(1, 100, 300)
        assert cache.find_by_offset(300) == EpochEntry(2, 300, 500)
        assert cache.find_by_offset(10**15) == EpochEntry(3, 500)
        empty = EpochFileCache()
        assert (empty.first_entry(), empty.last_entry(), empty.last_epoch()) == (None, None, -1)

    def test_entries_returns_a_copy(self, cache: EpochFileCache) -> None:
        cache.entries().clear()
        assert len(cache.entries()) == 3

    def test_init_from_entries_rebuilds_ends(self, path: Path) -> None:
        c = EpochFileCache(path)
        c.init_from_entries([EpochEntry(1, 0, 999), EpochEntry(3, 50, 777), EpochEntry(5, 80, 1000)])
        assert c.entries() == [EpochEntry(1, 0, 50), EpochEntry(3, 50, 80), EpochEntry(5, 80, 1000)]
        assert decode_epoch_file(path.read_text()) == [(1, 0), (3, 50), (5, 80)]

    def test_consistent_point_identical_caches(self) -> None:
        a = cache_of((1, 0), (2, 10))
        b = cache_of((1, 0), (2, 10))
        a.set_last_end(100)
        b.set_last_end(80)
        assert a.find_consistent_point(b) == 80
        assert b.find_consistent_point(a) == 80
        assert a.find_consistent_point(EpochFileCache()) == -1
