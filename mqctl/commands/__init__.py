"""One module per group of commands; each has a ``COMMANDS`` list the CLI registers.

The package's modules are its public surface (tests/unit/test_exported_members.py). ``MODULE_OF`` names the
module of every command, so that a command line imports the module of the command it runs and no other
(``mqctl getSyncStateSet`` does not load the broker's store); tests/unit/cli/test_lazy_commands.py checks it
against the modules' ``COMMANDS``."""

__all__ = ["broker", "brokeradmin", "brokerconfig", "cluster", "consume", "controller", "flush", "message", "namesrv", "offset", "query", "quickstart",
           "report", "route", "store", "subgroup", "tls", "topic"]

MODULE_OF = {
    **dict.fromkeys(("startController", "getControllerMetaData", "getSyncStateSet", "electMaster", "cleanBrokerMetadata",
                     "getControllerConfig", "updateControllerConfig"), "controller"),
    **dict.fromkeys(("startBroker", "sendMessage", "getBrokerEpoch", "haStatus"), "broker"),
    "consumeMessage": "consume",
    **dict.fromkeys(("updateTopic", "deleteTopic"), "topic"),
    **dict.fromkeys(("topicRoute", "topicClusterList"), "route"),
    **dict.fromkeys(("topicList", "getKvConfig", "updateKvConfig", "deleteKvConfig", "getNamesrvConfig",
                     "updateNamesrvConfig", "wipeWritePerm", "addWritePerm"), "namesrv"),
    **dict.fromkeys(("clusterList", "brokerStatus", "topicStatus", "consumerProgress", "consumerConnection",
                     "producerConnection"), "brokeradmin"),
    **dict.fromkeys(("getBrokerConfig", "updateBrokerConfig"), "brokerconfig"),
    "resetOffsetByTime": "offset",
    "queryMsgByKey": "query",
    **dict.fromkeys(("queryMsgById", "queryMsgByUniqueKey", "queryMsgByOffset"), "message"),
    **dict.fromkeys(("updateSubGroup", "deleteSubGroup"), "subgroup"),
    "resetMasterFlushOffset": "flush",
    "cluster": "cluster",
    "quickstart": "quickstart",
    "report": "report",
    "checkStore": "store",
    "tls": "tls",
}
