"""The suite against an older SGLang release (issue: a gate that compares something): sglang 0.5.22 with
``--no-deps`` in a venv over the running environment (``tests/envs.py``: a virtualenv's, the system's or a user
install's packages, whichever this interpreter sees). Its kernels are found where 0.5.22 keeps them, so no cell is
our adapter's fault or error; the gate against the installed release says what it could not compare."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs import own_env, venv_over_running

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "0.5.22"
SLICE = ["tests/kernels/test_verify.py", "tests/kernels/test_commit.py", "-k", "b8-spine-deep-bs3- or b8-spine-deep-bs3]"]


def _sweep_slice(python: str, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pytest", *SLICE, "-q", "-p", "no:cacheprovider", "--ddtree-tier=interpret",
                           "--ddtree-static=off", f"--ddtree-results={results}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={**own_env(), "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def release_python(tmp_path_factory) -> str:
    where = tmp_path_factory.mktemp("sglang-release")
    python = str(venv_over_running(where))
    # the running environment's pip installs into the new venv (no ensurepip: seconds saved)
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--disable-pip-version-check",
                          "--no-deps", "--ignore-installed", f"sglang=={RELEASE}"], capture_output=True, text=True,
                         timeout=900)
    if pip.returncode != 0:
        if "Could not find a version" in pip.stderr or "NewConnectionError" in pip.stderr or "Network" in pip.stderr:
            pytest.skip(f"sglang=={RELEASE} cannot be downloaded here: {pip.stderr.strip().splitlines()[-1]}")
        raise AssertionError(pip.stderr)
    return python


def _outcomes(path: Path) -> dict:
    return {(r["backend"], r["kernel"]): r for r in map(json.loads, path.read_text().splitlines())
            if r["kind"] == "result"}


def test_an_older_release_runs_without_faults_of_ours_and_the_gate_says_what_it_could_not_compare(
        release_python, tmp_path):
    old, new = tmp_path / f"sglang-{RELEASE}.jsonl", tmp_path / "sglang-installed.jsonl"
    ran_old, ran_new = _sweep_slice(release_python, old), _sweep_slice(sys.executable, new)
    assert ran_old.returncode == 0, ran_old.stdout[-3000:]
    assert ran_new.returncode == 0, ran_new.stdout[-3000:]
    cells = _outcomes(old)
    env = next(json.loads(x) for x in old.read_text().splitlines() if '"kind":"env"' in x)
    assert env["sglang"] == RELEASE
    assert not [c for c in cells.values() if c["outcome"] in ("fault", "error")], [
        (c["kernel"], c["message"][:200]) for c in cells.values() if c["outcome"] in ("fault", "error")]
    for kernel in ("verify_tree_greedy", "accept_out_cache_loc", "commit_outputs", "bonus_tokens", "move_kv"):
        assert cells[("sglang-triton", kernel)]["outcome"] == "pass", kernel  # found where 0.5.22 keeps it
    front = cells[("sglang-triton", "front_out_cache_loc")]
    assert front["outcome"] == "skip" and front["message"].startswith(f"absent in sglang {RELEASE}: looked for")
    gate = subprocess.run([sys.executable, "-m", "ddtree_compat", "diff", str(old), str(new), "--backend",
                           "sglang-triton"], cwd=ROOT, capture_output=True, text=True)
    assert gate.returncode == 3, gate.stdout[-2000:]
    assert "**NOT COMPARED**" in gate.stdout and "front_out_cache_loc" in gate.stdout
    assert "the baseline ran none of them (skip: absent in sglang 0.5.22" in gate.stdout
