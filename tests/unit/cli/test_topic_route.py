"""topicRoute's mqadmin text: a route laid out as real mqadmin printed it, 5.3.3 (fastjson 1.x) and 5.5.0
(fastjson2), for the same route (recorded from the kit's clusters, addresses replaced); topicClusterList; a
topic the name server does not know. The name server is faked in memory."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from mqctl.commands.route import route_bean
from mqctl.javajson import Bean, pretty
from services.common.codes import ResponseCode
from services.remoting import bodies
from services.remoting.command import RemotingCommand, RequestCode, make_response
from tests.unit.cli.conftest import Invoke, assert_one_line_error

#: The name server's answer: 3 replicas of broker-a, 3 read and 5 write queues, an order config.
ANSWER = (b'{"brokerDatas":[{"brokerAddrs":{3:"10.0.0.3:10911",0:"10.0.0.1:10911",2:"10.0.0.2:10911"},'
          b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
          b'"orderTopicConf":"broker-a:5","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":3,'
          b'"topicSysFlag":0,"writeQueueNums":5}]}')
MQADMIN_5_3_3 = (
    '{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"10.0.0.1:10911",2:"10.0.0.2:10911",3:"10.0.0.3:10911"\n'
    '\t\t\t},\n\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster",\n\t\t\t"enableActingMaster":false\n'
    '\t\t}\n\t],\n\t"filterServerTable":{},\n\t"orderTopicConf":"broker-a:5",\n\t"queueDatas":[\n\t\t{\n'
    '\t\t\t"brokerName":"broker-a",\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":3,\n\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":5\n\t\t}\n\t]\n}')
MQADMIN_5_5_0 = (
    '{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{\n\t\t\t\t0:"10.0.0.1:10911",\n\t\t\t\t2:"10.0.0.2:10911",\n'
    '\t\t\t\t3:"10.0.0.3:10911"\n\t\t\t},\n\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster",\n'
    '\t\t\t"enableActingMaster":false\n\t\t}\n\t],\n\t"filterServerTable":{},\n\t"orderTopicConf":"broker-a:5",\n'
    '\t"queueDatas":[\n\t\t{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":3,\n'
    '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":5\n\t\t}\n\t]\n}')


@pytest.mark.parametrize(("fastjson2", "expected"), [(False, MQADMIN_5_3_3), (True, MQADMIN_5_5_0)],
                         ids=["5.3.3", "5.5.0"])
def test_a_route_is_laid_out_as_mqadmin_of_each_version_prints_it(fastjson2: bool, expected: str) -> None:
    assert pretty(route_bean(bodies.TopicRouteData.decode(ANSWER)), fastjson2) == expected


def test_a_null_field_is_left_out_and_an_empty_map_is_braces() -> None:
    """As both versions printed TBW102's route: no orderTopicConf (null), ``"filterServerTable":{}``."""
    value = Bean({"orderTopicConf": None, "filterServerTable": {}, "perm": 7})
    assert pretty(value, False) == pretty(value, True) == '{\n\t"filterServerTable":{},\n\t"perm":7\n}'


# ---------------------------------------------------------------------- the commands, on a name server in memory
@dataclass
class FakeNameServer:
    """Answers 105 with ANSWER (or TOPIC_NOT_EXIST for another topic) and 106 with two clusters, at a version."""

    version: int = 479
    route: bytes = ANSWER

    def client(self, *args: object, **kwargs: object) -> FakeNameServer:
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            if request.ext_fields["topic"] != "RouteT":
                answer = make_response(request, ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server "
                                       f"for the topic: {request.ext_fields['topic']}")
            else:
                answer = make_response(request, ResponseCode.SUCCESS, body=self.route)
        else:
            assert request.code == RequestCode.GET_BROKER_CLUSTER_INFO
            answer = make_response(request, ResponseCode.SUCCESS, body=(
                b'{"brokerAddrTable":{},"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"],'
                b'"Other":["broker-c"],"Copy":["broker-a"]}}'))
        return dataclasses.replace(answer, version=self.version)


@pytest.fixture
def namesrv(monkeypatch: pytest.MonkeyPatch) -> FakeNameServer:
    fake = FakeNameServer()
    monkeypatch.setattr("mqctl.commands.namesrv.BlockingRemoting", fake.client)
    return fake


@pytest.mark.parametrize(("version", "expected"), [(479, MQADMIN_5_3_3), (513, MQADMIN_5_5_0)], ids=["5.3.3", "5.5.0"])
def test_topic_route_prints_what_the_mqadmin_of_the_servers_version_prints(
        mqctl: Invoke, namesrv: FakeNameServer, version: int, expected: str) -> None:
    namesrv.version = version
    result = mqctl("topicRoute", "-n", "127.0.0.1:9876", "-t", "RouteT", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected + "\n"


def test_topic_cluster_list_names_the_clusters_of_the_first_broker_group(mqctl: Invoke,
                                                                          namesrv: FakeNameServer) -> None:
    result = mqctl("topicClusterList", "-n", "127.0.0.1:9876", "-t", "RouteT", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Copy\nDefaultCluster\n"  # a HashSet<String>'s order
    namesrv.route = b'{"brokerDatas":[],"queueDatas":[]}'
    empty = mqctl("topicClusterList", "-n", "127.0.0.1:9876", "-t", "RouteT", "--format", "mqadmin")
    assert (empty.exit_code, empty.stdout) == (0, "")


@pytest.mark.parametrize("command", ["topicRoute", "topicClusterList"])
def test_a_topic_the_name_server_does_not_know_is_one_error_line(mqctl: Invoke, namesrv: FakeNameServer,
                                                                  command: str) -> None:
    result = mqctl(command, "-n", "127.0.0.1:9876", "-t", "NoSuchTopic", "--format", "mqadmin")
    assert_one_line_error(result, 4, "no route for topic NoSuchTopic", "TOPIC_NOT_EXIST")
    assert result.stdout == ""
