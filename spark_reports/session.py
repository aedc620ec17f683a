"""Building the SparkSession the reports run in.

Spark 4 from the pip package needs care on a machine like ours (see docs/report.md):

- a host name resolving to loopback makes Spark bind to another interface, so local and loopback
  masters get ``SPARK_LOCAL_IP=127.0.0.1`` and a driver host/bind address of 127.0.0.1;
- executors must run the same Python as the driver, so ``PYSPARK_PYTHON`` defaults to ours;
- the session time zone is the host's unless set, so it is pinned to UTC;
- Spark logs a lot at start-up, before ``setLogLevel`` can act, so unless verbose the driver JVM gets
  a log4j2 file at level ERROR and its console output goes to a log file instead of the terminal.

Problems a user can fix (no Java, an old Java, a master nobody listens on, a JVM that will not start)
become one :class:`~spark_reports.errors.ReportError` each. Nothing here imports pyspark at module level.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from spark_reports import cds
from spark_reports.cds import ClassArchive
from spark_reports.errors import MasterUnreachableError, SettingError, SparkSetupError, spark_messages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "mqctl-report"
#: Spark 4 runs on Java 17 and 21 only (Java 8 and 11 were dropped).
MIN_JAVA = 17

BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
}
LOOPBACK_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
#: The driver JVM we start for a small input compiles with C1 only: such a report is a short job, for which
#: C2's compiling costs more CPU than it saves (docs/report.md, "Performance"). A -XX:TieredStopAtLevel of
#: the user's comes later in the options and wins.
DRIVER_JIT = "-XX:TieredStopAtLevel=1"
QUIET_LOG4J2 = """\
# Written by mqctl report: only errors from the driver JVM.
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""
LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")
#: ``java -version`` output per java binary, as seen by :func:`check_java`
_JAVA_VERSIONS: dict[str, str] = {}


@dataclass(frozen=True)
class SessionOptions:
    """How to start Spark. ``master=None`` leaves the choice to spark-submit or spark-defaults.conf."""

    master: str | None = DEFAULT_MASTER
    conf: Mapping[str, str] = field(default_factory=dict)
    verbose: bool = False
    app_name: str = APP_NAME
    #: where the driver JVM's console output goes when not verbose (default: a temporary file)
    log_file: Path | None = None
    #: send the spark_reports package to the executors of a cluster master
    ship_package: bool = True
    #: the input is small (pipeline.SMALL_INPUT_BYTES): a driver JVM we start compiles with C1 only
    small_input: bool = False


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` → dict; a pair without ``=`` or with an empty key is a :class:`SettingError`."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"bad --conf {pair!r}: expected key=value, e.g. spark.driver.memory=2g")
        result[key.strip()] = value.strip()
    return result


def is_local_master(master: str | None) -> bool:
    return master is not None and (master == "local" or master.startswith(("local[", "local-cluster[")))


def standalone_hosts(master: str) -> list[tuple[str, int]]:
    """``spark://h1:p1,h2:p2`` → [(h1, p1), (h2, p2)]; [] for other master URLs."""
    if not master.startswith("spark://"):
        return []
    result = []
    for item in master[len("spark://"):].split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise SettingError(f"bad Spark master URL {master!r}: expected spark://host:port")
        result.append((host.strip("[]"), int(port)))
    return result


def is_loopback_master(master: str | None) -> bool:
    """Local masters, and standalone masters whose every host is a loopback address."""
    if is_local_master(master):
        return True
    hosts = standalone_hosts(master) if master else []
    return bool(hosts) and all(h.startswith("127.") or h in LOOPBACK_HOSTS for h, _ in hosts)


# ---------------------------------------------------------------------- checks before starting a JVM
def java_command() -> str:
    """The java Spark's launcher will use: $JAVA_HOME/bin/java if JAVA_HOME is set, else PATH's."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if not candidate.exists():
            raise SparkSetupError(f"JAVA_HOME is {home}, but {candidate} does not exist; mqctl report needs "
                                  f"Java {MIN_JAVA} or 21")
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise SparkSetupError(f"mqctl report runs on Spark, which needs Java {MIN_JAVA} or 21: no java on PATH "
                              "and JAVA_HOME is not set (e.g. apt-get install openjdk-17-jre-headless)")
    return found


def check_java() -> int:
    """Fail with one clear message unless a Java Spark 4 accepts is installed; returns its major version."""
    java = java_command()
    try:
        probe = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkSetupError(f"could not run {java} -version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', probe.stderr + probe.stdout)
    _JAVA_VERSIONS[java] = probe.stderr + probe.stdout
    if probe.returncode != 0 or match is None:
        raise SparkSetupError(f"{java} -version failed; mqctl report needs Java {MIN_JAVA} or 21")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise SparkSetupError(f"Spark 4 needs Java {MIN_JAVA} or 21, but {java} is Java {major}; "
                              "install a newer one or point JAVA_HOME at it")
    return major


def check_master_reachable(master: str, timeout: float = 5.0) -> None:
    """A standalone master that nobody listens on would make Spark retry for a minute; fail fast."""
    hosts = standalone_hosts(master)
    reasons = []
    for host, port in hosts:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    if hosts:
        raise MasterUnreachableError(f"Spark master {master} is unreachable ({'; '.join(reasons)})")


# ---------------------------------------------------------------------- the session
def effective_conf(options: SessionOptions, log4j_file: Path | None,
                   preset: Collection[str] = (), archive: ClassArchive | None = None) -> dict[str, str]:
    """Our defaults, except for keys already ``preset`` (by spark-defaults.conf or spark-submit), then the
    user's ``--conf`` on top (their driver Java options keep ours first). A driver JVM we start (a master
    given) for a small input compiles with C1 only, unless spark-defaults.conf sets its Java options."""
    conf = dict(BASE_CONF)
    if is_loopback_master(options.master):
        conf.update(LOOPBACK_CONF)
    conf = {k: v for k, v in conf.items() if k not in preset}
    user = dict(options.conf)
    jit = options.small_input and options.master is not None and "spark.driver.extraJavaOptions" not in preset
    ours = " ".join(([f"-Dlog4j2.configurationFile=file:{log4j_file}"] if log4j_file is not None else [])
                    + ([archive.java_options()] if archive is not None else []) + ([DRIVER_JIT] if jit else []))
    if ours:
        theirs = user.pop("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{ours} {theirs}".strip()
    conf.update(user)
    return conf


def class_archive(options: SessionOptions, preset: Collection[str] = ()) -> ClassArchive | None:
    """The driver JVM's class-data-sharing archive (see spark_reports.cds), unless turned off, or unless
    spark-defaults.conf sets Java options (ours would replace them)."""
    from pyspark.find_spark_home import _find_spark_home

    java = java_command()
    if ("spark.driver.extraJavaOptions" in preset or java not in _JAVA_VERSIONS
            or not cds.enabled(options.conf.get("spark.driver.extraJavaOptions", ""))):
        return None
    return cds.plan(java, _JAVA_VERSIONS[java], Path(_find_spark_home()) / "jars")


def build_session(options: SessionOptions) -> SparkSession:
    """Check Java and the master, then start (or join) the SparkSession; see the module docstring."""
    if options.master is not None:
        check_master_reachable(options.master)
    check_java()
    _prepare_environment(options.master)
    if options.master is None:  # under spark-submit: its JVM and settings are already there
        spark = _start(options, effective_conf(options, None, _running_conf_keys()), None)
    else:
        preset = spark_defaults_keys()
        archive = class_archive(options, preset)
        with tempfile.TemporaryDirectory(prefix="mqctl-report-") as scratch:
            # log4j2 reads its file once, while the JVM starts; the file can go afterwards.
            log4j = None if options.verbose else _write_log4j(Path(scratch))
            log_file = None if options.verbose else (options.log_file or _temp_log_file())
            spark = _start(options, effective_conf(options, log4j, preset, archive), log_file)
        if log_file is not None and options.log_file is None:  # ours, and Spark started: not needed later
            atexit.register(_remove, log_file)
        if archive is not None and archive.pending is not None:
            from pyspark import SparkContext

            atexit.register(archive.finish, getattr(SparkContext._gateway, "proc", None))
    spark.sparkContext.setLogLevel("INFO" if options.verbose else "ERROR")
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.WARNING if options.verbose else logging.CRITICAL)
    if options.ship_package and options.master is not None and not is_local_master(options.master):
        # Executors fetch the file from the driver while the application runs: keep it until exit.
        shipped = Path(tempfile.mkdtemp(prefix="mqctl-report-py-"))
        atexit.register(shutil.rmtree, shipped, True)
        spark.sparkContext.addPyFile(str(package_zip(shipped)))
    return spark


def spark_defaults_keys() -> set[str]:
    """Keys set in the spark-defaults.conf Spark's launcher will read: our defaults leave them alone."""
    from pyspark.find_spark_home import _find_spark_home

    directory = os.environ.get("SPARK_CONF_DIR") or os.path.join(_find_spark_home(), "conf")
    path = Path(directory) / "spark-defaults.conf"
    if not path.is_file():
        return set()
    keys = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.add(re.split(r"[\s=]", line, maxsplit=1)[0])
    return keys


def _running_conf_keys() -> set[str]:
    """Settings of the JVM spark-submit started (or of a new one, outside spark-submit)."""
    from pyspark import SparkConf, SparkContext

    try:
        SparkContext._ensure_initialized()
    except Exception as exc:  # pyspark raises several kinds here; all mean "no JVM"
        raise SparkSetupError(f"Spark did not start: {_first_line(exc)}") from exc
    return {key for key, _ in SparkConf().getAll()}


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def _temp_log_file() -> Path:
    fd, name = tempfile.mkstemp(prefix="mqctl-report-spark-", suffix=".log")
    os.close(fd)
    return Path(name)


def _prepare_environment(master: str | None) -> None:
    if master is None or is_loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _write_log4j(directory: Path) -> Path:
    path = directory / "log4j2.properties"
    path.write_text(QUIET_LOG4J2, encoding="utf-8")
    return path


def _start(options: SessionOptions, settings: Mapping[str, str], log_file: Path | None) -> SparkSession:
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark import SparkConf
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    conf = SparkConf().setAll(list(settings.items()))
    if options.master is not None:
        conf.setMaster(options.master)
    if options.master is not None or not conf.contains("spark.app.name"):  # keep spark-submit's --name
        conf.setAppName(options.app_name)
    try:
        if log_file is not None:
            _launch_quiet_gateway(conf, log_file)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.conf.get("spark.sql.session.timeZone")  # builds the session state: bad SQL settings fail here
        return spark
    except (PySparkException, Py4JError, OSError) as exc:
        raise SparkSetupError(f"Spark did not start: {_first_line(exc)}{_log_hint(log_file)}") from exc


def _launch_quiet_gateway(conf: object, log_file: Path) -> None:
    """Start the driver JVM ourselves so its console output goes to ``log_file``, not the terminal.

    pyspark reuses an already started gateway, so the SparkSession built next runs in this JVM."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # a JVM is already running in this process
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    out: IO[bytes] = open(log_file, "wb")  # noqa: SIM115 - the JVM keeps writing to it
    gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)  # type: ignore[arg-type]


def _first_line(exc: BaseException) -> str:
    return spark_messages(exc)[-1]  # the innermost cause says what is wrong


def _log_hint(log_file: Path | None) -> str:
    """The JVM's first own complaint (e.g. "Invalid maximum heap size: -Xmxlots") and where the log is."""
    if log_file is None or not log_file.exists():
        return ""
    noise = ("WARNING: Using incubator modules", "Setting default log level", "To adjust logging level")
    lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines()]
    useful = [line for line in lines if line and not line.startswith(noise)]
    detail = f"; the JVM said: {useful[0][:300]}" if useful else ""
    return f"{detail} (JVM log: {log_file})"


def package_zip(directory: Path) -> Path:
    """Zip the spark_reports package (for ``addPyFile`` or ``spark-submit --py-files``)."""
    root = Path(__file__).resolve().parent
    target = directory / "spark_reports.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*.py")):
            archive.write(path, str(Path("spark_reports") / path.relative_to(root)))
    return target


def spark_version(spark: SparkSession) -> str:
    return str(spark.version)
