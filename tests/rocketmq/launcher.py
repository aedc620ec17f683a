"""mqadmin's launcher (``launcher/mqctl/tools/MqadminThenExit.java``): RocketMQ's own ``MQAdminStartup.main``,
then ``System.exit(0)`` as soon as it returns.

Run as RocketMQ ships it, every mqadmin command lingers about three seconds after its output while Netty's
event loops wait out their graceful quiet period; the rocketmq tier runs some hundreds of them, so that wait
was most of the tier's time. The launcher changes nothing mqadmin prints or sends. It is compiled with
``javac`` against the version's own jars, once per version and source, into
``<cache>/<version>/mqadmin-launcher/<digest>/`` (a complete folder is reused; concurrent builders each
compile into a folder of their own and the first to rename it into place wins).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from tests.rocketmq.errors import KitError, ToolMissing
from tests.rocketmq.fetch import COMPLETE, RocketMQ

SOURCE = Path(__file__).with_name("launcher") / "mqctl" / "tools" / "MqadminThenExit.java"
MAIN_CLASS = "mqctl.tools.MqadminThenExit"
JAVAC_TIMEOUT_S = 120.0


class LauncherBuildFailed(KitError):
    """javac could not compile the launcher (the message carries its errors)."""


def javac_for(java: str) -> str:
    """The javac of the JDK ``java`` belongs to, else the one on PATH."""
    beside = Path(java).resolve().with_name("javac")
    if beside.is_file():
        return str(beside)
    found = shutil.which("javac")
    if found is None:
        raise ToolMissing(f"javac not found beside {java} or on PATH: it compiles the tests' mqadmin launcher "
                          "(Debian: apt-get install openjdk-17-jdk-headless)")
    return found


def launcher_classes(java: str, rocketmq: RocketMQ) -> Path:
    """The folder of the compiled launcher for ``rocketmq``'s version (built unless complete)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    folder = rocketmq.cache / rocketmq.version / "mqadmin-launcher" / digest
    if (folder / COMPLETE).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{digest}.", suffix=".partial", dir=folder.parent))
    done = subprocess.run([javac_for(java), "-nowarn", "-cp", rocketmq.classpath, "-d", str(partial), str(SOURCE)],
                          capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S, check=False)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise LauncherBuildFailed(f"javac could not compile {SOURCE.name} against RocketMQ {rocketmq.version}:\n"
                                  f"{done.stdout}{done.stderr}")
    (partial / COMPLETE).write_text(MAIN_CLASS + "\n")
    try:
        partial.rename(folder)
    except OSError:  # another builder put its copy there first: the same source, the same classes
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def launcher_jar(java: str, rocketmq: RocketMQ) -> Path:
    """The launcher's classes in a jar (``launcher.jar`` beside them, made once): a class data archive takes
    no folder of classes on the classpath (classdata.py)."""
    folder = launcher_classes(java, rocketmq)
    jar = folder / "launcher.jar"
    if jar.is_file():
        return jar
    # a file of its own for each maker (processes, and threads of one process), renamed into place: two
    # makers at once each put a whole jar of the same classes there
    handle, name = tempfile.mkstemp(prefix="launcher.jar.", suffix=".partial", dir=folder)
    partial = Path(name)
    try:
        with os.fdopen(handle, "wb") as out, zipfile.ZipFile(out, "w") as archive:
            for path in sorted(folder.rglob("*.class")):
                archive.write(path, path.relative_to(folder).as_posix())
        os.replace(partial, jar)
    finally:
        partial.unlink(missing_ok=True)
    return jar
