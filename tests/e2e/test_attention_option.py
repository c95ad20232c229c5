"""``--ddtree-e2e-attention`` bad input: an unknown name, or one the installed SGLang's ``--attention-backend``
lacks (here: the stand-in server's probe), is one line on stderr with pytest's usage-error status, before anything
runs or is written (the pattern of ``tests/unit/test_bad_input.py``; through ``python -m ddtree_compat sweep``
the same line exits 2)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import own_env

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, *args, **env):
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    base = own_env()
    base.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep.join([str(ROOT), base.get("PYTHONPATH", "")]), **env)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", "test_x.py", *args], cwd=tmp_path,
                       env=base, capture_output=True, text=True, timeout=300)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written
    return r


@pytest.mark.parametrize("value, words", [
    ("fa4", "field '--ddtree-e2e-attention' = 'fa4': unknown attention backend 'fa4'; allowed: default, triton"),
    ("triton,,Flashinfer", "unknown attention backend 'Flashinfer'"),
])
def test_an_unknown_backend_is_a_usage_error(tmp_path, value, words):
    r = _run(tmp_path, f"--ddtree-e2e-attention={value}")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == int(pytest.ExitCode.USAGE_ERROR), r.stdout[-1000:] + r.stderr
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.stdout + r.stderr


def test_a_backend_the_installed_sglang_lacks_is_a_usage_error(tmp_path):
    env = dict(DDTREE_FAKE_GPUS="sm90", DDTREE_E2E_SERVER_MODULE="tests.e2e.fake_sglang",
               FAKE_SGLANG_ATTENTION="triton,flashinfer")
    r = _run(tmp_path, "--ddtree-e2e-attention=triton,fa3", **env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == int(pytest.ExitCode.USAGE_ERROR), r.stdout[-1000:] + r.stderr
    assert len(lines) == 1 and "has no attention backend 'fa3'" in lines[0], r.stderr
    ok = _run(tmp_path, "--ddtree-e2e-attention=triton,default", **env)  # what it has: no error
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
