"""Settings for the whole suite."""

from __future__ import annotations

import os

# The report's class archive (spark_reports.cds) is written after a JVM exits and checked by a detached
# process, which would outlive the test that started the JVM. Off by default here; the tests of the
# archive turn it on with their own cache directory and wait for that process to finish.
os.environ.setdefault("MQCTL_SPARK_CDS", "0")
