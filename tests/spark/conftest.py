"""One SparkSession for every Spark unit test (a JVM costs seconds and ~700 MB; never start two), stopped
once the folder's last test is done, not at the end of the whole run.

Built with the report's own ``build_session`` (so its settings are exercised too), on ``local[2]``
with two shuffle partitions: the datasets here are a few rows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEST_CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "1g"}


@pytest.fixture(scope="package")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        if os.environ.get("CI"):  # CI installs Java: a missing one is a failure, never a silent skip
            pytest.fail("no Java runtime in CI: the Spark tests need Java 17 or 21")
        pytest.skip("no Java runtime on this developer machine: the Spark tests need Java 17 or 21")
    from spark_reports.session import SessionOptions, build_session

    log_file = tmp_path_factory.mktemp("spark") / "driver.log"
    session = build_session(SessionOptions(master="local[2]", conf=TEST_CONF, app_name="mqctl-tests",
                                           log_file=log_file, small_input=True))  # as mqctl report's for them
    yield session
    session.stop()
