"""Created topics on disk: written whole or not at all, read back exactly or refused naming the file."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from services.broker import topics as t


def test_created_topics_survive_a_reload(tmp_path: Path) -> None:
    registry = t.TopicRegistry(tmp_path / "config" / "topics.json")
    registry.load()
    assert registry.create("TopicB") and registry.create("TopicA")
    assert not registry.create("TopicA")
    again = t.TopicRegistry(registry.path)
    again.load()
    assert again.names == {"TopicA", "TopicB"}
    assert registry.path.read_bytes() == t.encode_file(frozenset({"TopicA", "TopicB"}))


def test_no_file_means_no_created_topics(tmp_path: Path) -> None:
    registry = t.TopicRegistry(tmp_path / "topics.json")
    registry.load()
    assert registry.names == frozenset()


@pytest.mark.parametrize("raw", [
    b"", b"{", b"[]", b'{"crc":1,"topics":["a"]}', b'{"topics":["a"]}',
    b'{"crc":1,"topics":["a"],"x":1}', b'{"crc":"1","topics":[]}',
])
def test_a_damaged_file_is_refused_naming_it(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "topics.json"
    path.write_bytes(raw)
    with pytest.raises(t.TopicsDamaged, match=f"{path} is damaged .*'Damaged topics.json'"):
        t.TopicRegistry(path).load()


def test_a_name_that_is_no_topic_is_refused_even_with_a_good_crc(tmp_path: Path) -> None:
    text = '["../etc"]'
    path = tmp_path / "topics.json"
    path.write_bytes(f'{{"crc":{zlib.crc32(text.encode())},"topics":{text}}}'.encode())
    with pytest.raises(t.TopicsDamaged, match="'../etc', which is no topic name"):
        t.TopicRegistry(path).load()


def test_unsorted_or_repeated_names_are_refused(tmp_path: Path) -> None:
    for text in ('["b","a"]', '["a","a"]'):
        path = tmp_path / "topics.json"
        path.write_bytes(f'{{"crc":{zlib.crc32(text.encode())},"topics":{text}}}'.encode())
        with pytest.raises(t.TopicsDamaged, match="do not match its crc"):
            t.TopicRegistry(path).load()


def test_bad_names_and_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = t.TopicRegistry(tmp_path / "topics.json")
    with pytest.raises(ValueError, match="illegal"):
        registry.create("a/b")
    monkeypatch.setattr(t, "MAX_TOPICS", 1)
    registry.create("one")
    with pytest.raises(t.TopicsFull):
        registry.create("two")
    assert not (tmp_path / "topics.json.tmp").exists()
