"""``pytest -m <arch>`` at the root of a checkout, the way the project is used: the marker selects among the kernel
cells too (the root ``conftest.py`` adds ``tests/kernels`` when ``-m`` names a marker of the suite), while a plain
``pytest`` (the README's test command) runs the suite's own tests only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _config(markexpr: str, source):
    return SimpleNamespace(args_source=source, args=["tests/matrix", "tests/e2e", "tests/unit"],
                           getoption=lambda name, default=None: markexpr if name == "markexpr" else default)


@pytest.mark.parametrize("markexpr, source, added", [
    ("sm120", pytest.Config.ArgsSource.TESTPATHS, True),
    ("sm120 and static", pytest.Config.ArgsSource.TESTPATHS, True),
    ("interpret", pytest.Config.ArgsSource.TESTPATHS, True),
    ("blackwell_rtx", pytest.Config.ArgsSource.TESTPATHS, True),
    ("", pytest.Config.ArgsSource.TESTPATHS, False),
    ("slow", pytest.Config.ArgsSource.TESTPATHS, False),  # not a marker of the suite
    ("sm120", pytest.Config.ArgsSource.ARGS, False),  # paths given: they are what is collected
])
def test_the_kernel_tests_join_testpaths_only_when_a_suite_marker_is_selected(markexpr, source, added):
    import conftest

    config = _config(markexpr, source)
    conftest.pytest_configure(config)
    assert (config.args[-1] == conftest.KERNEL_TESTS) == added
    assert config.args[:3] == ["tests/matrix", "tests/e2e", "tests/unit"]
    # pytest's header says "testpaths: ..." only for args that are the testpaths alone
    assert (config.args_source == pytest.Config.ArgsSource.TESTPATHS) == (source == pytest.Config.ArgsSource.TESTPATHS
                                                                          and not added)


@pytest.mark.long
def test_pytest_m_sm120_at_the_root_collects_the_sm120_cells():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "sm120", "--co", "-q", "-p", "no:cacheprovider"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    assert any(i.startswith("tests/kernels/test_static.py::test_static[static-sm120-") for i in ids), ids[:20]
    assert any("emulated-sm120]" in i for i in ids), ids[:20]
    assert all(i.startswith(("tests/kernels/", "tests/e2e/test_serve.py")) for i in ids), [
        i for i in ids if not i.startswith("tests/kernels/")][:5]


@pytest.mark.long
@pytest.mark.parametrize("args, cause", [
    (["-k", "zzz_no_such_cell"], "-k 'zzz_no_such_cell' leaves it out"),
    (["tests/unit/test_root_selection.py"], "leave tests/kernels out"),
])
def test_a_marker_run_that_selects_no_static_cell_names_the_real_cause(args, cause):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT", "DDTREE_"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "sm120", "-q", "-p", "no:cacheprovider", "-n", "0",
                          *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    line = next(x for x in run.stdout.splitlines() if "FlashInfer's verify kernel" in x)
    assert cause in line and "--ddtree-backend" not in line, line


@pytest.mark.long
def test_the_suite_collects_where_the_interpreter_already_imported_a_sitecustomize(tmp_path):
    """A Debian / Ubuntu system Python (and every venv made from it) imports /usr/lib/python3.X/sitecustomize.py at
    start: the planted negative controls' module of that name must still load, or the collection error ends the whole
    run (``pytest -m sm120`` at the root collected no cell). Here a sitecustomize on PYTHONPATH plays the system's."""
    (tmp_path / "sitecustomize.py").write_text("SYSTEM = True\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                          "tests/e2e/test_planted.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "error" not in run.stdout.lower(), run.stdout[-1500:] + run.stderr[-1500:]
    assert "test_one_bit_flipped_per_request_with_a_sibling" in run.stdout
