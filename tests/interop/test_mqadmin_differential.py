"""mqctl ``--format mqadmin`` against real RocketMQ beside real mqadmin, each question asked of both at
once (tests/interop/conftest.py, QUESTIONS), for each tested version: the same bytes (for haStatus, but for
the transfer speeds and read/write times, which change from one moment to the next)."""

from __future__ import annotations

import re

import pytest

from tests.interop.conftest import Answers

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("question", ["getControllerMetaData", "getSyncStateSet -b", "getSyncStateSet -c"])
def test_the_same_bytes(answers: Answers, question: str) -> None:
    assert answers.ours[question] == answers.theirs[question]


@pytest.mark.parametrize("question", ["getBrokerEpoch -b", "getBrokerEpoch -c"])
def test_get_broker_epoch(answers: Answers, question: str) -> None:
    """The same bytes: the brokers in the order of mqadmin's HashSet of their addresses (CommandUtil's)."""
    assert answers.ours[question] == answers.theirs[question]


#: What changes from one moment to the next in haStatus: transfer speeds and the last read/write times.
LIVE_FIELD = re.compile(r"(#TransferSpeed\(KB/s\)\t|#Last(?:Read|Write)Time\t).*")
LIVE_COLUMN = re.compile(r"^(\S+ +\d+ +\d+ +)\S+")


def steady(text: str) -> str:
    lines = [LIVE_FIELD.sub(r"\1<live>", line) for line in text.splitlines()]
    return "\n".join(line if line.startswith("#") else LIVE_COLUMN.sub(r"\1<live>", line) for line in lines)


@pytest.mark.parametrize("question", ["haStatus master", "haStatus slave"])
def test_ha_status_of_one_broker(answers: Answers, question: str) -> None:
    """The same bytes but for the live figures (speeds, last read and write times)."""
    assert steady(answers.ours[question]) == steady(answers.theirs[question])


def test_ha_status_of_a_cluster(answers: Answers) -> None:
    """Each group's master only, in the order of a HashSet of their addresses, but for the live figures."""
    assert steady(answers.ours["haStatus -c"]) == steady(answers.theirs["haStatus -c"])


def test_get_controller_config(answers: Answers) -> None:
    """The nodes in the order of mqadmin's HashMap(4) of their addresses, each node's properties in the order
    a java.util.Properties loaded with them iterates."""
    assert answers.ours["getControllerConfig"] == answers.theirs["getControllerConfig"]
