"""mqctl ``--format mqadmin`` against real RocketMQ prints byte for byte what real mqadmin prints, asked
at the same time of the same cluster (each tested version)."""

from __future__ import annotations

import pytest

from tests.interop.conftest import both
from tests.rocketmq import RocketMQCluster

pytestmark = pytest.mark.timeout(300)


def test_get_controller_meta_data(rocketmq: RocketMQCluster) -> None:
    follower = next(a for a in rocketmq.controller_addrs.split(";") if a != rocketmq.leader())
    theirs, ours = both(rocketmq, ("getControllerMetaData", "-a", follower),
                        ("getControllerMetaData", "-a", follower, "--format", "mqadmin"))
    assert ours == theirs


def test_get_sync_state_set_of_a_group(rocketmq: RocketMQCluster) -> None:
    before = rocketmq.sync_state()
    theirs, ours = both(rocketmq, ("getSyncStateSet", "-a", rocketmq.controller_addrs, "-b", rocketmq.group),
                        ("getSyncStateSet", "-a", rocketmq.controller_addrs, "-b", rocketmq.group,
                         "--format", "mqadmin"))
    assert rocketmq.sync_state() == before, "the SyncStateSet changed while both were asked"
    assert ours == theirs


def java_hash_set_order(addresses: list[tuple[int, str]]) -> list[str]:
    """The order a java.util.HashSet<String> of up to 12 addresses iterates in (16 buckets: the bucket is
    the spread String.hashCode's low 4 bits; within a bucket, insertion order, here by broker id)."""
    def bucket(text: str) -> int:
        h = 0
        for char in text:
            h = (31 * h + ord(char)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15
    return [address for _, address in sorted(addresses, key=lambda item: (bucket(item[1]), item[0]))]


def epoch_blocks(text: str) -> list[str]:
    return [block.strip("\n") for block in text.split("\n\n") if block.strip()]


def block_address(block: str) -> tuple[int, str]:
    fields = dict(line[1:].split("\t", 1) for line in block.splitlines() if "\t" in line)
    return int(fields["brokerId"]), fields["brokerAddr"]


def test_get_broker_epoch_of_a_group(rocketmq: RocketMQCluster) -> None:
    """The same blocks, byte for byte, but in another order unless the two orders happen to agree: mqadmin
    prints them in the HashSet order of the addresses (CommandUtil's), mqctl by broker id."""
    args = ("getBrokerEpoch", "-n", rocketmq.namesrv_addr, "-b", rocketmq.group)
    theirs, ours = both(rocketmq, args, (*args, "--format", "mqadmin"))
    assert sorted(epoch_blocks(ours)) == sorted(epoch_blocks(theirs))
    addresses = [block_address(block) for block in epoch_blocks(theirs)]
    assert [address for _, address in addresses] == java_hash_set_order(addresses)
    assert [address for _, address in sorted(addresses)] == [block_address(b)[1] for b in epoch_blocks(ours)]
    if ours != theirs:  # the only difference left is the order (docs/operations.md, "mqctl beside RocketMQ")
        pytest.xfail("mqctl orders getBrokerEpoch's brokers by id, mqadmin in HashSet order of their addresses")
