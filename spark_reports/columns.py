"""Names of the report's columns, shared by the job and the renderers (docs/report.md defines each)."""

from __future__ import annotations

#: The per-group columns, in output order (the job's DataFrame, summary.json, CSV, Parquet, tables).
GROUP_COLUMNS = (
    "clusterName", "brokerName", "replicas", "masterEpochs", "failovers", "uncleanElections",
    "adminElections", "failedElections", "meanTenureMs", "maxTenureMs", "currentTenureMs", "shrinkCount",
    "expandCount", "underReplicatedMs", "divergentEpochs", "currentMasterBrokerId", "currentMasterEpoch",
    "failoverRank",
)
#: Per-group counts the cluster row sums (it also counts groups and divergent epochs).
SUMMED = ("replicas", "masterEpochs", "failovers", "uncleanElections", "adminElections", "failedElections",
          "shrinkCount", "expandCount", "underReplicatedMs")
#: The cluster row's numbers, in output order.
CLUSTER_COUNTS = ("groups", *SUMMED, "divergentEpochs")
#: Columns holding milliseconds (shown as durations in tables).
DURATIONS = ("meanTenureMs", "maxTenureMs", "currentTenureMs", "underReplicatedMs")
