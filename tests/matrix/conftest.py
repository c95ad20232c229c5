"""Session-wide things the matrix tests build once: the wheel and the venv it is installed into.

Under xdist each worker is its own process; what is built goes under the session's shared temp folder
(``shared_tmp``, ``tests/conftest.py``: the parent of every worker's ``basetemp``) and is built by whichever
worker asks first, under a file lock, with a marker written only once it is complete. A build that fails
fails every test that needs it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import locked, own_env, venv_over_running

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, cwd, env=None, timeout=900):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def outside_env() -> dict:
    """The environment of a process that must see only the installed package: no PYTHONPATH, no DDTREE_*."""
    return {k: v for k, v in own_env().items() if k != "PYTHONPATH"}


@pytest.fixture(scope="session")
def wheel(shared_tmp) -> Path:
    """This checkout's wheel, built once per session from a copy (the checkout gets no build/ or egg-info)."""
    where = shared_tmp / "wheel"
    with locked(shared_tmp / "wheel.lock"):
        done = where / "done"
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            src = where / "src"
            for package in ("ddtree_compat", "tests/kernels"):  # the kernel tests ship as ddtree_compat.kernel_tests
                shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
            for name in ("pyproject.toml", "README.md"):
                shutil.copy(ROOT / name, src / name)
            built = run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                         where / "dist", src], cwd=where)
            assert built.returncode == 0, built.stderr[-3000:]
            done.write_text("")
    (whl,) = (where / "dist").glob("ddtree_compat-*.whl")
    return whl


@pytest.fixture(scope="session")
def wheel_python(shared_tmp, wheel) -> Path:
    """``python`` of a fresh venv outside the repository over the running environment, with the wheel installed
    by pip offline (``--no-index``: a dependency the running environment lacks fails the install)."""
    venv = shared_tmp / "wheel-venv"
    python = venv / "bin" / "python"
    with locked(shared_tmp / "wheel-venv.lock"):
        done = shared_tmp / "wheel-venv.done"
        if not done.exists():
            venv_over_running(venv)
            installed = run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", wheel],
                            cwd=shared_tmp, env=outside_env())
            assert installed.returncode == 0, installed.stderr[-3000:]
            done.write_text("")
    return python
