"""For every test folder: Triton's interpreter on a host without a GPU, and a temp folder the whole session
shares, xdist workers included."""

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


def pytest_configure(config: pytest.Config) -> None:
    """On a host without a GPU the tests run SGLang's and the implementations' Triton kernels on the CPU, so
    Triton's interpreter is on before any test imports one (Triton reads ``TRITON_INTERPRET`` when a kernel is
    defined: a helper kernel imported compiled, by a test that ran first in the worker, fails every
    interpreted kernel calling it later). Not left to the plugin: it sets it only for a session that asks for
    the suite, and a unit test asks for none.

    torch is imported here too, once per process: pytester drops every module first imported during a test that
    uses it, and torch cannot be imported a second time in one process (``SystemError: ... bad call flags``), so a
    worker whose first torch import fell inside a pytester test failed every later test that imports it."""
    import torch  # noqa: F401 - see above

    from ddtree_compat.arch import detect_gpus
    from ddtree_compat.tiers import enable_interpreter

    if not detect_gpus():
        enable_interpreter()
