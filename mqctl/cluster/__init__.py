"""Local clusters of real processes on 127.0.0.1: quickstart's (``local.LocalCluster``), ``mqctl cluster
up``'s, which outlives the command (``dev.DevCluster``), the controllers and brokers they are made of
(``nodes``), which the tests and benchmarks start too, and process helpers (``processes``).

The names below are the package's API (``from mqctl.cluster import ControllerCluster``); its modules are its
public surface (tests/unit/test_exported_members.py)."""

from mqctl.cluster.dev import LAYOUT_FILE as LAYOUT_FILE
from mqctl.cluster.dev import DevCluster as DevCluster
from mqctl.cluster.dev import NodeSpec as NodeSpec
from mqctl.cluster.local import DEMO_BROKER as DEMO_BROKER
from mqctl.cluster.local import DEMO_CONTROLLER as DEMO_CONTROLLER
from mqctl.cluster.local import LocalCluster as LocalCluster
from mqctl.cluster.nodes import BrokerNode as BrokerNode
from mqctl.cluster.nodes import ControllerCluster as ControllerCluster
from mqctl.cluster.nodes import ControllerNode as ControllerNode
from mqctl.cluster.nodes import make_broker as make_broker
from mqctl.cluster.processes import RAFT_PASSWORD_FILE as RAFT_PASSWORD_FILE
from mqctl.cluster.processes import ephemeral_port_start as ephemeral_port_start
from mqctl.cluster.processes import free_port_pair as free_port_pair
from mqctl.cluster.processes import pid_running as pid_running
from mqctl.cluster.processes import port_free as port_free
from mqctl.cluster.processes import raft_password_props as raft_password_props
from mqctl.cluster.processes import running as running
from mqctl.cluster.processes import send_and_wait as send_and_wait
from mqctl.cluster.processes import spawn as spawn
from mqctl.cluster.processes import wait_until as wait_until

__all__ = ["dev", "local", "nodes", "processes"]
