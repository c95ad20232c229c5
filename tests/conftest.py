"""Fixtures for every test folder: a temp folder the whole session shares, xdist workers included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (without xdist: the session's basetemp), for things
    built once per session under a file lock (``tests.envs.locked``)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / "shared"
