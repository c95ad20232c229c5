"""Repo-level pytest configuration.

The suite's own plugin (``ddtree_compat.plugin``) is loaded through its ``pytest11`` entry point once the package is
installed (``pip install -e .``); here we add pytester, which the suite's tests of its own machinery use to run real
pytest sessions, and the one rule of this checkout's layout that ``testpaths`` cannot say: the kernel cells
(``tests/kernels``) are collected from the repository root only when ``-m`` selects one of the suite's tier, arch
or family markers (``pytest -m sm120``). A plain ``pytest`` runs the suite's own tests (``testpaths``), as the
README's test command does; ``docs/architecture.md`` says why it is done here.
"""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)

KERNEL_TESTS = "tests/kernels"
"""The kernel tests' folder, relative to the repository root (shipped in the wheel as ``ddtree_compat.kernel_tests``)."""


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """With no path on the command line (``testpaths`` used) and a ``-m`` expression naming a marker of the suite,
    add the kernel tests to what is collected; the marker expression then selects among them."""
    from ddtree_compat.plugin.markers import selected

    if config.args_source == pytest.Config.ArgsSource.TESTPATHS and selected(config.getoption("markexpr", "")):
        config.args = [*config.args, KERNEL_TESTS]
        config.args_source = pytest.Config.ArgsSource.ARGS  # pytest's header then names no testpaths it outgrew
