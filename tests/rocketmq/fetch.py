"""Resolving Apache RocketMQ's jars from Maven Central into a cache folder, one per version.

``RocketMQ(version).fetch()`` runs ``mvn dependency:copy-dependencies`` on this folder's pom.xml into
``<cache>/<version>/lib`` and marks the folder complete; a complete folder is reused without asking
Maven. The cache is ``$MQCTL_ROCKETMQ_CACHE``, else ``$XDG_CACHE_HOME/mqctl-rocketmq``, else
``~/.cache/mqctl-rocketmq``: outside the repository, so every work tree and every fresh clone on the
machine (CI's included) shares one copy, and nothing downloaded can be committed by accident. Maven's
own cache (``~/.m2``) is reused as usual, so even a new cache folder fills without the network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.rocketmq.errors import ArtifactUnavailable, ToolMissing

POM = Path(__file__).with_name("pom.xml")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
COMPLETE = ".complete"
MAVEN_TIMEOUT_S = 900.0

#: Where Maven names an artifact it could not get, in the messages of Maven 3.8/3.9.
_ARTIFACT_PATTERNS = (
    re.compile(r"could not be resolved: ((?:[\w.-]+:[\w.-]+(?::[\w.-]+){1,3}(?:, )?)+)"),
    re.compile(r"(\S+:\S+) was not found in"),
    re.compile(r"Could not (?:find|transfer) artifact (\S+)"),
    re.compile(r"Failed to read artifact descriptor for (\S+)"),
    re.compile(r"Plugin (\S+) or one of its dependencies could not be resolved"),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_UNREACHABLE_HINTS = ("Could not transfer", "Connection refused", "Unknown host", "UnknownHost",
                      "Connect to", "timed out", "Network is unreachable", "No route to host")


def cache_root() -> Path:
    explicit = os.environ.get("MQCTL_ROCKETMQ_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "mqctl-rocketmq"


def require_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissing(f"{name} not found on PATH: it is needed {why} (Debian: apt-get install "
                          f"{'maven' if name == 'mvn' else 'openjdk-17-jre-headless'})")
    return path


def java_major(java: str) -> int:
    """The major version of ``java -version`` (17 for "17.0.15", 8 for "1.8.0_392")."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        raise ToolMissing(f"cannot tell the version of {java}: {out.strip()[:200]!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def require_java() -> str:
    java = require_tool("java", "to run RocketMQ's servers and mqadmin")
    major = java_major(java)
    if major < 17:
        raise ToolMissing(f"{java} is Java {major}; the kit's flags are for Java 17 or later")
    return java


def missing_artifacts(maven_output: str) -> tuple[str, ...]:
    """The artifacts Maven names as unresolved, in the order it names them, each once."""
    found: list[str] = []
    for pattern in _ARTIFACT_PATTERNS:
        for match in pattern.finditer(maven_output):
            for name in match.group(1).split(", "):
                name = name.strip().rstrip(":")
                if name and name not in found:
                    found.append(name)
    return tuple(found)


def resolution_error(version: str, maven_output: str) -> ArtifactUnavailable:
    maven_output = _ANSI.sub("", maven_output)
    artifacts = missing_artifacts(maven_output)
    cause = ("the registry cannot be reached" if any(h in maven_output for h in _UNREACHABLE_HINTS)
             else "the registry does not serve " + ("them" if len(artifacts) > 1 else "it"))
    named = ", ".join(artifacts) if artifacts else "(Maven named none; its output follows)"
    first = next((line for line in maven_output.splitlines() if "[ERROR]" in line), maven_output[-1000:])
    return ArtifactUnavailable(f"RocketMQ {version}: Maven could not resolve {named}: {cause}.\n"
                               f"Maven said: {first.strip()[:3000]}", artifacts)


@dataclass(frozen=True)
class RocketMQ:
    """One version of RocketMQ's jars in the cache."""

    version: str
    cache: Path = field(default_factory=cache_root)
    #: Extra arguments for mvn (e.g. ``-s settings.xml``, ``-Dmaven.repo.local=...``).
    maven_args: tuple[str, ...] = ()

    @property
    def lib(self) -> Path:
        return self.cache / self.version / "lib"

    @property
    def classpath(self) -> str:
        return f"{self.lib}/*"

    def is_fetched(self) -> bool:
        return (self.lib / COMPLETE).is_file()

    def fetch(self) -> RocketMQ:
        """Resolve the jars unless a complete copy is there; raises ``ArtifactUnavailable`` naming what failed."""
        if self.is_fetched():
            return self
        mvn = require_tool("mvn", "to resolve RocketMQ's jars from Maven Central")
        partial = self.lib.with_name("lib.partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [mvn, "-B", "-q", "-U", *self.maven_args, "-f", str(POM), f"-Drmq.version={self.version}",
                   f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={partial}",
                   "-DincludeScope=runtime"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        if done.returncode != 0 or not any(partial.glob("rocketmq-broker-*.jar")):
            raise resolution_error(self.version, done.stdout + done.stderr)
        jars = sorted(p.name for p in partial.glob("*.jar"))
        (partial / COMPLETE).write_text("\n".join(jars) + "\n")
        shutil.rmtree(self.lib, ignore_errors=True)
        partial.rename(self.lib)
        return self
