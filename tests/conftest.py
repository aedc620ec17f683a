"""Settings for the whole suite."""

from __future__ import annotations

import os

import pytest

# The report's class archive (spark_reports.cds) is written after a JVM exits and checked by a detached
# process, which would outlive the test that started the JVM. Off by default here; the tests of the
# archive turn it on with their own cache directory and wait for that process to finish.
os.environ.setdefault("MQCTL_SPARK_CDS", "0")


#: What a test folder's tests start, as a marker or markers (tests/unit and tests/property start nothing).
FOLDER_MARKERS = {"integration": "integration", "chaos": "integration", "netns": "integration",
                  "fuzz": "integration", "bench": "integration", "spark": "spark", "browser": "browser",
                  "interop": ("integration", "rocketmq")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by its folder, so that ``-m 'not integration and not spark'`` runs exactly what
    starts nothing; a test marked against its folder is an error."""
    root = config.rootpath / "tests"
    for item in items:
        try:
            folder = item.path.relative_to(root).parts[0]
        except ValueError:
            continue
        marker = FOLDER_MARKERS.get(folder)
        if marker is not None:
            for name in (marker,) if isinstance(marker, str) else marker:
                item.add_marker(name)
        elif folder in ("unit", "property") and any(next(item.iter_markers(name=m), None) for m in ("integration", "spark", "browser", "rocketmq")):
            raise pytest.UsageError(f"{item.nodeid} is marked as starting processes or a JVM but lives in "
                                    f"tests/{folder}, whose tests start nothing: move it")
