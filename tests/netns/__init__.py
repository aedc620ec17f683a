"""Multi-host test topologies in network namespaces (see topology.py)."""
