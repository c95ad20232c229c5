"""The main job from an installed package, not a checkout: build the wheel, install it into a fresh virtual
environment outside the repository, and run a slice of ``python -m ddtree_compat sweep`` from another folder.

The environment sees what the running interpreter sees (a virtualenv's, the system's or a user install's
site-packages, ``tests/envs.py``: what ``scripts/setup.sh`` installed: torch, Triton, SGLang, pytest), so pip
resolves the wheel's declared dependencies offline (``--no-index``: a dependency the running environment lacks
fails the install) and the only ``ddtree_compat`` it can import is the wheel's. The wheel and the venv are
built once per session (``tests/matrix/conftest.py``).
"""

import json
import zipfile

from .conftest import outside_env, run

# Files the wheel must ship, as paths inside it (the package's layout: one list to change when it moves).
SHIPPED = ("ddtree_compat/kernel_tests/test_verify.py", "ddtree_compat/kernel_tests/sweep.ini",
           "ddtree_compat/grid_index.json", "ddtree_compat/known_issues.toml",
           "ddtree_compat/report/templates/report.html.j2")
# The kernel-test node id the sweep slice must record (as from a checkout: rootdir is the package's parent).
SLICE_NODEID = "ddtree_compat/kernel_tests/test_verify.py::test_verify_tree_greedy[interpret-sglang-triton-b8-spine-deep-bs3]"


def test_the_wheel_ships_the_kernel_tests_and_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in SHIPPED:
        assert shipped in names, shipped


def test_the_sweep_runs_from_an_installed_wheel_in_another_folder(wheel_python, tmp_path):
    python, env = wheel_python, outside_env()
    venv = python.parents[1]
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
    assert SLICE_NODEID in nodeids, sorted(nodeids)
    for suffix in (".md", ".html", ".png"):
        assert (elsewhere / "out" / f"slice{suffix}").stat().st_size > 0
    assert not (elsewhere / ".ddtree").exists()  # everything went where the sweep was told
