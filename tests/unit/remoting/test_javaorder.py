"""Java's hash collections' iteration order (services/remoting/javaorder.py), against what OpenJDK 17.0.15
printed for the same keys put in the same order (HashMap.keySet, HashSet, Properties.entrySet)."""

from __future__ import annotations

from services.remoting.javaorder import (
    concurrent_hash_map_order,
    hash_map_order,
    java_hash_order,
    message_queue_order,
)

CONTROLLER_KEYS = ["controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId", "mappedFileSize",
                   "controllerStorePath", "enableElectUncleanMaster", "isProcessReadEvent", "notifyBrokerRoleChanged",
                   "scanNotActiveBrokerInterval", "controllerThreadPoolNums",
                   "controllerRequestThreadPoolQueueCapacity", "rocketmqHome", "configStorePath", "controllerType",
                   "Aa", "BB"]  # "Aa" and "BB" have the same String.hashCode


def test_java_hash_order_is_what_a_java_hash_map_iterates() -> None:
    # keys put in this order into a java.util.HashMap and printed by keySet() (OpenJDK 17)
    keys = ["broker-a", "broker-b", "a", "B", "Z", "broker-10", "grp-x", "Ünïcode", "\U0001d518x"]
    assert java_hash_order(keys, 16) == ["grp-x", "a", "B", "\U0001d518x", "broker-10", "broker-b", "Z",
                                         "broker-a", "Ünïcode"]
    names = [f"n{i}" for i in range(20)]  # 20 keys: the map grew to 32 buckets
    assert java_hash_order(names, 32) == ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10",
                                          "n12", "n11", "n14", "n13", "n16", "n15", "n18", "n17", "n19"]
    assert hash_map_order(names) == java_hash_order(names, 32)


def test_a_hash_map_asked_for_4_and_a_hash_set_of_addresses() -> None:
    # new HashMap<>(4) of three controllers (mqadmin's getControllerConfig); new HashSet<>() of five brokers
    assert hash_map_order(["127.0.0.1:30878", "127.0.0.1:30868", "127.0.0.1:30858"], 4) == [
        "127.0.0.1:30858", "127.0.0.1:30868", "127.0.0.1:30878"]
    assert hash_map_order(["127.0.0.1:30911", "127.0.0.1:30921", "127.0.0.1:30931", "10.0.0.1:10911",
                           "10.0.0.2:10911"]) == ["10.0.0.1:10911", "127.0.0.1:30931", "127.0.0.1:30911",
                                                  "10.0.0.2:10911", "127.0.0.1:30921"]


def test_properties_iterate_as_a_concurrent_hash_map_grown_from_16_buckets() -> None:
    # new Properties(), put key0..key59 then CONTROLLER_KEYS; four resizes, a collision moved in reverse
    keys = [f"key{i}" for i in range(60)] + CONTROLLER_KEYS
    java = ["key1", "key2", "key0", "isProcessReadEvent", "key5", "key6", "key3", "key4", "key9", "key40", "key7", "controllerRequestThreadPoolQueueCapacity", "key8", "key44", "key43", "key42", "key41", "controllerDLegerPeers", "key37", "key36", "key35", "key34", "key39", "key38", "enableElectUncleanMaster", "controllerType", "key51", "key50", "key11", "key55", "key10", "key54", "controllerThreadPoolNums", "key53", "key52", "key48", "key47", "key46", "key45", "notifyBrokerRoleChanged", "key49", "configStorePath", "rocketmqHome", "Aa", "BB", "key22", "scanNotActiveBrokerInterval", "key21", "key20", "key15", "key59", "key14", "key58", "key13", "key57", "key12", "key56", "key19", "controllerDLegerGroup", "key18", "key17", "key16", "controllerStorePath", "mappedFileSize", "controllerDLegerSelfId", "key33", "key32", "key31", "key30", "key26", "key25", "key24", "key23", "key29", "key28", "key27"]
    assert concurrent_hash_map_order(keys) == java
    assert concurrent_hash_map_order([*keys, "key3"]) == java  # a key put again keeps its place


def test_a_hash_set_of_message_queues() -> None:
    """mqadmin's consumeMessage visits a topic's queues in the order of a HashSet<MessageQueue>
    (MessageQueue.hashCode over broker name, queue id, topic): what mqadmin 5.3.3 printed for 8 queues."""
    assert message_queue_order("TopicA", "broker-a", range(8)) == [7, 5, 6, 3, 4, 1, 2, 0]
