"""The upgrade gate on real results files: the H200 run, a copy with planted regressions, and two real
interpret-tier sweeps (the second with a broken ``sglang-triton`` standing in for a bad upgrade)."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_compat.families.verify.records import make_case
from ddtree_compat.cli import KERNEL_TESTS
from ddtree_compat.gate import compare
from ddtree_compat.results import load

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs/results/2026-11-30-sm90-default.jsonl.gz"
PLANTED = {  # case id -> (backend, outcome after the "upgrade")
    "b8-spine-deep-bs3-cap16": ("sglang-triton", "zero-accept"),
    "b12-spine-partial-bs3": ("sglang-triton", "wrong"),
    "b64-random-deep-bs8": ("sglang-cuda", "fault"),
}
DROPPED = ("oracle", "b0-spine-none-bs1")


def diff(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "ddtree_compat", "diff", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def regressed(tmp_path_factory):
    """The H200 results with three cells broken and one cell missing, as a candidate run would write them."""
    out = tmp_path_factory.mktemp("gate") / "candidate.jsonl"
    lines = []
    for line in gzip.decompress(H200.read_bytes()).decode().splitlines():
        obj = json.loads(line)
        key = (obj.get("backend"), obj.get("case_id"))
        if key == DROPPED:
            continue
        if (obj["kind"] == "result" and obj["kernel"] == "verify_tree_greedy"
                and PLANTED.get(obj["case_id"], (None,))[0] == obj["backend"]):
            obj["outcome"] = PLANTED[obj["case_id"]][1]
            obj["message"] = "planted"
        lines.append(json.dumps(obj))
    out.write_text("\n".join(lines) + "\n")
    return out


def cells(path):
    """Distinct cells (kernel, backend, arch, case) with a result line in a results file."""
    return len({(o["kernel"], o["backend"], o["arch"], o["case_id"]) for o in map(json.loads, (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()).splitlines())
                if o["kind"] == "result"})


def ran(path) -> int:
    return sum(1 for o in map(json.loads, gzip.decompress(Path(path).read_bytes()).decode().splitlines())
               if o["kind"] == "result" and o["outcome"] in ("pass", "wrong", "zero-accept", "fault"))


def test_same_file_passes_the_gate():
    r = diff(H200, H200)
    assert r.returncode == 0, r.stderr
    assert (f"**PASS**: no cell regressed; {ran(H200)} cell(s) compared; 0 fixed, 0 newly covered, 0 changed "
            f"otherwise, 0 new, {cells(H200)} unchanged.") in r.stdout
    assert "| sglang-triton · verify_tree_greedy · sm90 | 1145 | 1145 | 1145 | 1145 | 1145 |" in r.stdout  # grid + property


def test_planted_regression_fails_the_gate_and_names_each_cell(regressed, tmp_path):
    r = diff(H200, regressed, "-o", tmp_path / "gate.md")
    assert r.returncode == 1, r.stderr
    assert "**FAIL**: 4 cell(s) regressed" in r.stdout
    for case_id, (backend, outcome) in PLANTED.items():
        assert f"- `{case_id}` ({backend} · sm90, verify_tree_greedy): pass -> {outcome}: planted" in r.stdout
    assert "- `b0-spine-none-bs1` (oracle · sm90, verify_tree_greedy): pass -> missing" in r.stdout
    assert r.stdout.index("pass -> fault") < r.stdout.index("pass -> zero-accept") < r.stdout.index("pass -> wrong")
    assert (tmp_path / "gate.md").read_text() == r.stdout


def test_reverse_direction_lists_fixes_and_passes(regressed):
    g = compare(load([regressed]), load([H200]))
    assert not g.failed and g.regressed == [] and g.changed == [] and g.unchanged == cells(H200) - 4
    assert {(c.key[1], c.key[3], c.before) for c in g.fixed} == {(b, c, o) for c, (b, o) in PLANTED.items()}
    assert [(c.key[1], c.key[3], c.after) for c in g.new] == [(*DROPPED, "pass")]
    r = diff(regressed, H200)
    assert r.returncode == 0 and "## Fixed (-> pass) (3)" in r.stdout and "## New in the candidate (1)" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["MISSING.jsonl", H200], "field 'path' = 'MISSING.jsonl'"),
    ([H200], "the following arguments are required: candidate"),
])
def test_bad_input_exits_2(args, words):
    r = diff(*args)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr


def test_env_only_file_is_bad_input(tmp_path):
    p = tmp_path / "env.jsonl"
    p.write_text(gzip.decompress(H200.read_bytes()).decode().splitlines()[0] + "\n")
    r = diff(H200, p)
    assert r.returncode == 2 and "field 'result' is missing: no cells in" in r.stderr


BROKEN_TRITON = '''
from ddtree_compat.families.verify.variants import ZeroAccept


class BrokenTriton(ZeroAccept):
    """Stands in for an SGLang upgrade whose Triton verify kernel accepts nothing."""

    name = "sglang-triton"
'''


def test_gate_on_two_real_interpret_sweeps(tmp_path):
    (tmp_path / "broken_triton.py").write_text(BROKEN_TRITON)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    cases = [make_case(8, "spine", "deep", 3, capacity=c).save(tmp_path / "cases") for c in (None, 16)]
    case_args = [a for p in cases for a in ("--ddtree-case", str(p))]  # two cases; no grid to generate

    def sweep(name, backend):
        r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--tier", "interpret", "-n", "0",
                            "--out-dir", str(tmp_path), "--name", name, "--backend", "oracle", "--backend", backend,
                            "--tests", str(KERNEL_TESTS / "test_verify.py"),
                            "--", *case_args, "-k", "not drawn_trees", "--ddtree-static=off"],
                           capture_output=True, text=True, env=env)
        return r, tmp_path / f"{name}.jsonl"

    ok, pinned = sweep("pinned", "sglang-triton")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    bad, candidate = sweep("candidate", "broken_triton:BrokenTriton")
    assert bad.returncode == 1  # the sweep itself fails; the gate says which cells regressed
    r = diff(pinned, candidate, env=env)
    assert r.returncode == 1, r.stderr
    assert ("**FAIL**: 2 cell(s) regressed; 4 cell(s) compared; 0 fixed, 0 newly covered, 0 changed otherwise, "
            "0 new, 2 unchanged.") in r.stdout
    assert "| sglang-triton · interpret | pass | zero-accept | 2 |" in r.stdout
    assert "- `b8-spine-deep-bs3-cap16` (sglang-triton · interpret, verify_tree_greedy): pass -> zero-accept" in r.stdout
    assert diff(pinned, pinned, env=env).returncode == 0


def _results(path, rows):
    env = {"kind": "env", "env_id": "e", "tier": "interpret", "gpus": []}
    path.write_text("".join(json.dumps(x) + "\n" for x in [env, *(
        {"kind": "result", "kernel": k, "tier": "interpret", "backend": b, "arch": "interpret", "case_id": c,
         "outcome": o, "message": m, "env_id": "e"} for k, b, c, o, m in rows)]))
    return path


def test_a_gate_with_nothing_compared_fails_as_not_compared(tmp_path):
    """Two runs where every SGLang cell skipped: the oracle cells alone must not make a PASS."""
    skipped = [("verify_tree_greedy", "sglang-triton", f"c{i}", "skip", "cannot import sglang: torchvision")
               for i in range(3)]
    ok = [("verify_tree_greedy", "oracle", f"c{i}", "pass", "") for i in range(3)]
    a, b = _results(tmp_path / "a.jsonl", ok + skipped), _results(tmp_path / "b.jsonl", ok + skipped)
    r = diff(a, b)
    assert r.returncode == 3, r.stdout
    assert "**NOT COMPARED**" in r.stdout and "sglang-triton: the baseline has no cell of it that ran" in r.stdout
    assert "cannot import sglang: torchvision" in r.stdout and "not compared: sglang-triton" in r.stderr
    assert diff(a, b, "--backend", "oracle").returncode == 0  # what can be compared, compared
    none = _results(tmp_path / "none.jsonl", skipped)
    r = diff(none, none)
    assert r.returncode == 3 and "no cell ran on both sides" in r.stdout


def test_a_backend_that_ran_on_neither_side_is_listed_beside_a_compared_one(tmp_path):
    """Two CPU runs of one install: sglang-triton compared, sglang-cuda (device tier only) skipped on both
    sides. The same file against itself passes and names what it could not vouch for; once sglang-cuda
    runs on one side only, it is not compared."""
    rows = [("verify_tree_greedy", "oracle", "c0", "pass", ""), ("verify_tree_greedy", "sglang-triton", "c0", "pass", ""),
            ("verify_tree_greedy", "sglang-cuda", "c0", "skip", "runs on the device tier only")]
    a = _results(tmp_path / "a.jsonl", rows)
    r = diff(a, a)
    assert r.returncode == 0, r.stdout
    assert "Ran on neither side (not failed): sglang-cuda" in r.stdout
    b = _results(tmp_path / "b.jsonl", rows[:2] + [("verify_tree_greedy", "sglang-cuda", "c0", "pass", "")])
    r = diff(a, b)
    assert r.returncode == 3 and "sglang-cuda" in r.stdout and "runs on the device tier only" in r.stdout, r.stdout


def test_one_sided_kernel_is_not_compared_and_skip_to_pass_is_newly_covered(tmp_path):
    """The 0.5.22 -> 0.5.23 shape: a kernel the baseline lacks (skip: absent) passes in the candidate; the
    verify kernel ran on both."""
    both = [("verify_tree_greedy", "sglang-triton", f"c{i}", "pass", "") for i in range(2)]
    lacks = [("front_out_cache_loc", "sglang-triton", f"c{i}", "skip", "absent in sglang 0.5.22: looked for x.y")
             for i in range(2)]
    has = [("front_out_cache_loc", "sglang-triton", f"c{i}", "pass", "") for i in range(2)]
    r = diff(_results(tmp_path / "old.jsonl", both + lacks), _results(tmp_path / "new.jsonl", both + has))
    assert r.returncode == 3, r.stdout
    assert "2 newly covered" in r.stdout and "0 fixed" in r.stdout
    assert ("sglang-triton · front_out_cache_loc · interpret: 2 cell(s) ran in the candidate; the baseline ran none of "
            "them (skip: absent in sglang 0.5.22: looked for x.y)") in r.stdout


def test_runs_of_different_archs_warn_that_nothing_lines_up(tmp_path):
    """The sm90 archive against a copy relabelled as another arch: every baseline cell is missing, and the
    gate says why instead of listing 15k regressions without comment."""
    other = tmp_path / "sm120.jsonl"
    other.write_text("".join(json.dumps({**o, "arch": "sm120"} if o["kind"] == "result" else o) + "\n"
                             for o in map(json.loads, gzip.decompress(H200.read_bytes()).decode().splitlines())))
    g = compare(load([H200]), load([other]))
    assert g.disjoint and g.failed
    r = diff(H200, other)
    assert r.returncode == 1
    assert "**Warning**: the two files share no backend · arch column" in r.stdout
    assert "sglang-triton · sm90" in r.stdout and "sglang-triton · sm120" in r.stdout
    assert not compare(load([H200]), load([H200])).disjoint


def test_runs_of_different_tiers_warn_even_when_columns_overlap(tmp_path):
    """A CPU run (interpret + static cells, whose static columns carry GPU archs) against a device run
    shares columns yet compares different things: the gate says so, in the report and on stderr."""
    other = tmp_path / "interpret.jsonl"
    other.write_text("".join(json.dumps({**o, "tier": "interpret"} if o["kind"] == "result" else o) + "\n"
                             for o in map(json.loads, gzip.decompress(H200.read_bytes()).decode().splitlines())))
    g = compare(load([H200]), load([other]))
    assert g.tiers_differ and not g.disjoint
    r = diff(H200, other)
    assert "cover different tiers (baseline: device; candidate: interpret)" in r.stdout
    assert "python -m ddtree_compat diff: warning: the two files cover different tiers" in r.stderr
    assert not compare(load([H200]), load([H200])).tiers_differ
