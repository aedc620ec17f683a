"""The epoch-history report on Spark: dataset loading, metrics, rendering, sessions.

The package's modules are its public surface (tests/unit/test_exported_members.py)."""

__all__ = ["cds", "charts", "columns", "dataset", "epoch_metrics", "errors", "jobs", "paths", "pipeline",
           "render", "session", "submit"]
