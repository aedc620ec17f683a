"""The kit's reading of Maven's errors (tests/rocketmq/fetch.py): which artifacts failed, and why."""

from __future__ import annotations

from tests.rocketmq.fetch import missing_artifacts, resolution_error

NOT_SERVED = (
    "\x1b[0m[ERROR] Failed to execute goal on project mqctl-rocketmq-kit: Could not resolve dependencies for "
    "project local.mqctl:mqctl-rocketmq-kit:pom:1: The following artifacts could not be resolved: "
    "org.apache.rocketmq:rocketmq-srvutil:jar:5.3.4, org.apache.rocketmq:rocketmq-tools:jar:5.3.4: Could not "
    "find artifact org.apache.rocketmq:rocketmq-srvutil:jar:5.3.4 in central (https://repo.example/maven2)\n")
UNREACHABLE = (
    "[ERROR] Plugin org.apache.maven.plugins:maven-dependency-plugin:3.6.1 or one of its dependencies could not "
    "be resolved: Failed to read artifact descriptor for org.apache.maven.plugins:maven-dependency-plugin:jar:"
    "3.6.1: Could not transfer artifact org.apache.maven.plugins:maven-dependency-plugin:pom:3.6.1 from/to "
    "nowhere (http://127.0.0.1:9/maven2): Connect to 127.0.0.1:9 [/127.0.0.1] failed: Connection refused\n")


def test_artifacts_the_registry_does_not_serve_are_named() -> None:
    error = resolution_error("5.3.4", NOT_SERVED)
    assert error.artifacts == ("org.apache.rocketmq:rocketmq-srvutil:jar:5.3.4",
                               "org.apache.rocketmq:rocketmq-tools:jar:5.3.4")
    assert str(error).startswith("RocketMQ 5.3.4: Maven could not resolve org.apache.rocketmq:rocketmq-srvutil:"
                                 "jar:5.3.4, org.apache.rocketmq:rocketmq-tools:jar:5.3.4: the registry does "
                                 "not serve them.")
    assert "\x1b" not in str(error)


def test_an_unreachable_registry_is_said_so() -> None:
    error = resolution_error("5.3.3", UNREACHABLE)
    assert "org.apache.maven.plugins:maven-dependency-plugin:3.6.1" in error.artifacts
    assert "the registry cannot be reached" in str(error)


def test_output_naming_nothing_still_gives_maven_s_words() -> None:
    assert missing_artifacts("[ERROR] something else broke") == ()
    assert "Maven said: [ERROR] something else broke" in str(resolution_error("5.3.3", "[ERROR] something else broke"))
