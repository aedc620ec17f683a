"""Created topics on disk: written whole or not at all, read back exactly or refused naming the file."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from services.broker import topics as t
from services.remoting.namesrv_bodies import TopicConfig


def test_created_topics_survive_a_reload(tmp_path: Path) -> None:
    registry = t.TopicRegistry(tmp_path / "config" / "topics.json")
    registry.load()
    assert registry.create("TopicB") and registry.create("TopicA")
    assert not registry.create("TopicA")
    again = t.TopicRegistry(registry.path)
    again.load()
    assert again.names == {"TopicA", "TopicB"}
    assert registry.path.read_bytes() == t.encode_file([TopicConfig("TopicB", 4, 4, 6), TopicConfig("TopicA", 4, 4, 6)])


def test_no_file_means_no_created_topics(tmp_path: Path) -> None:
    registry = t.TopicRegistry(tmp_path / "topics.json")
    registry.load()
    assert registry.names == frozenset()


@pytest.mark.parametrize("raw", [
    b"", b"{", b"[]", b'{"crc":1,"topics":["a"]}', b'{"topics":["a"]}',
    b'{"crc":1,"topics":["a"],"x":1}', b'{"crc":"1","topics":[]}', b'{"crc":1,"version":3,"topics":[]}',
    b'{"crc":1,"version":2,"topics":[]}', b'{"crc":0,"version":2,"topics":[{"topicName":1}]}',
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


def test_configs_survive_a_reload_with_every_field(tmp_path: Path) -> None:
    registry = t.TopicRegistry(tmp_path / "topics.json", queue_nums=8)
    config = TopicConfig("Orders", 8, 2, 4, "MULTI_TAG", 1, True, {"message.type": "FIFO"})
    assert registry.put(config) and not registry.put(config)  # the same config again changes nothing
    assert registry.put(TopicConfig("Orders", 8, 8, 6)) and registry.get("Orders") == TopicConfig("Orders", 8, 8, 6)
    registry.put(config)
    again = t.TopicRegistry(registry.path, queue_nums=8)
    again.load()
    assert again.configs == {"Orders": config}


def test_an_older_file_of_names_loads_with_the_implicit_configs(tmp_path: Path) -> None:
    """The file mqctl wrote before topics had configs: each topic has defaultTopicQueueNums queues, perm 6,
    and a group's retry topic one queue; the next write is in the new form."""
    text = '["%RETRY%cg","TopicA"]'
    path = tmp_path / "topics.json"
    path.write_bytes(f'{{"crc":{zlib.crc32(text.encode())},"topics":{text}}}'.encode())
    registry = t.TopicRegistry(path, queue_nums=8)
    registry.load()
    assert registry.configs == {"%RETRY%cg": TopicConfig("%RETRY%cg", 1, 1, 6), "TopicA": TopicConfig("TopicA", 8, 8, 6)}
    registry.create("TopicB")
    again = t.TopicRegistry(path, queue_nums=8)
    again.load()
    assert set(again.configs) == {"%RETRY%cg", "TopicA", "TopicB"} and b'"version":2' in path.read_bytes()


@pytest.mark.parametrize(("config", "problem"), [
    (TopicConfig("a b", 1, 1, 6), "illegal"),
    (TopicConfig("T", 1025, 1, 6), "readQueueNums 1025 is out of range"),
    (TopicConfig("T", 1, -1, 6), "writeQueueNums -1 is out of range"),
    (TopicConfig("T", 1, 1, 8), "perm 8"),
    (TopicConfig("T", 1, 1, 6, topic_sys_flag=-1), "topicSysFlag"),
    (TopicConfig("T", 1, 1, 6, attributes={"k" * 65: "v"}), "attributes"),
])
def test_a_config_beyond_the_bounds_is_not_kept(tmp_path: Path, config: TopicConfig, problem: str) -> None:
    assert problem in (t.config_problem(config) or "")
    with pytest.raises(ValueError, match=problem.split()[0]):
        t.TopicRegistry(tmp_path / "topics.json").put(config)
    assert not (tmp_path / "topics.json").exists()


def test_a_damaged_config_in_a_file_with_a_good_crc_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_bytes(t.encode_file([TopicConfig("T", 1, 1, 6)]).replace(b'"perm":6', b'"perm":9'))
    with pytest.raises(t.TopicsDamaged, match="damaged"):
        t.TopicRegistry(path).load()
