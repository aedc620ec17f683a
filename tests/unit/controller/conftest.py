from __future__ import annotations

import pytest

from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import mock_meta_data


@pytest.fixture
def manager() -> ReplicasInfoManager:
    return ReplicasInfoManager()


@pytest.fixture
def meta() -> ReplicasInfoManager:
    """A manager after RocketMQ's ``mockMetaData``."""
    m = ReplicasInfoManager()
    mock_meta_data(m)
    return m
