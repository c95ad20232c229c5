"""The main job from an installed package, not a checkout: build the wheel, install it into a fresh virtual
environment outside the repository, and run a slice of ``python -m ddtree_compat sweep`` from another folder.

The environment sees the host's site-packages (torch, Triton, SGLang, pytest: what ``scripts/setup.sh``
installed), so pip resolves the wheel's declared dependencies offline (``--no-index``: a dependency the host
lacks fails the install) and the only ``ddtree_compat`` it can import is the wheel's.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, cwd, env=None, timeout=900):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_sweep_runs_from_an_installed_wheel_in_another_folder(tmp_path):
    src = tmp_path / "src"  # the wheel is built from a copy: the checkout gets no build/ or egg-info
    for package in ("ddtree_compat", "tests/kernels"):  # the kernel tests ship as ddtree_compat.kernel_tests
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist",
                 src], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("ddtree_compat-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("ddtree_compat/kernel_tests/test_verify.py", "ddtree_compat/kernel_tests/sweep.ini",
                    "ddtree_compat/grid_index.json", "ddtree_compat/known_issues.toml",
                    "ddtree_compat/report/templates/report.html.j2"):
        assert shipped in names, shipped

    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DDTREE_")}
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", wheel],
                    cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([python, "-c", "import ddtree_compat; print(ddtree_compat.__file__)"], cwd=elsewhere, env=env)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr

    sweep = run([python, "-m", "ddtree_compat", "sweep", "--tier", "interpret", "--out-dir", "out", "--name", "slice",
                 "-n", "1", "--", "-k", "b8-spine-deep-bs3 and (test_verify_tree_greedy or move_kv)",
                 "--ddtree-static=off"], cwd=elsewhere, env=env)
    out = sweep.stdout + sweep.stderr
    assert sweep.returncode == 0, out[-4000:]
    assert "Traceback" not in out and "sglang-triton on interpret: runs" in out, out[-4000:]
    lines = [json.loads(x) for x in (elsewhere / "out" / "slice.jsonl").read_text().splitlines()]
    outcomes = {}
    for x in lines:
        if x["kind"] == "result":
            outcomes.setdefault((x["kernel"], x["backend"]), set()).add(x["outcome"])
    assert outcomes[("verify_tree_greedy", "sglang-triton")] == {"pass"} and outcomes[("move_kv", "sglang-triton")] == {"pass"}
    nodeids = {x["nodeid"] for x in lines if x["kind"] == "result"}  # as from a checkout: rootdir is the package's parent
    assert "ddtree_compat/kernel_tests/test_verify.py::test_verify_tree_greedy[interpret-sglang-triton-b8-spine-deep-bs3]" \
        in nodeids, sorted(nodeids)
    for suffix in (".md", ".html", ".png"):
        assert (elsewhere / "out" / f"slice{suffix}").stat().st_size > 0
    assert not (elsewhere / ".ddtree").exists()  # everything went where the sweep was told
