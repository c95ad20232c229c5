"""Fault containment with real pytest-xdist sessions: sticky faults replace the worker, crashes and
hangs are recorded by the controller, every result is durable, and a SIGKILLed run resumes."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ddtree_compat.families.verify.records import make_case
from ddtree_compat.faultinject import INJECTORS
from ddtree_compat.isolation import scan

from .conftest import VERIFY_TEST

GOOD = ("oracle",)
CPU_FAULTS = {  # backend spec -> expected (outcome, fault class)
    "ddtree_compat.faultinject:Raises": ("fault", "illegal-instruction"),
    "ddtree_compat.faultinject:RaisesOOM": ("fault", "out-of-memory"),
    "ddtree_compat.faultinject:Aborts": ("fault", "other"),
    "ddtree_compat.faultinject:Hangs": ("fault", "hang"),
}
GPU_FAULTS = {f"ddtree_compat.faultinject:{c.__name__}": ("fault", c.expected_fault) for c in INJECTORS}


def results_by_backend(path):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    out = {}
    for line in lines:
        if line["kind"] == "result":
            out.setdefault(line["backend"], []).append(line)
    return out


def mixed_sweep(pytester, faults, tier, timeout, cases=2):
    pytester.makepyfile(test_kernel=VERIFY_TEST)
    paths = [str(make_case(b, "spine", "deep", 2).save(pytester.path / "cases")) for b in (3, 8, 12)[:cases]]
    args = ["-p", "no:cacheprovider", f"--ddtree-tier={tier}", "--ddtree-results=r.jsonl", "-n", "2",
            "--max-worker-restart=100", f"--timeout={timeout}", "--timeout-method=thread"]
    for spec in (*GOOD, *faults):
        args.append(f"--ddtree-backend={spec}")
    for p in paths:
        args += ["--ddtree-case", p]
    result = pytester.runpytest_subprocess(*args, timeout=600)
    if os.environ.get("SELFTEST_RESULTS_COPY"):  # keep the device run's results (docs/results/)
        shutil.copy(pytester.path / "r.jsonl", os.environ["SELFTEST_RESULTS_COPY"])
    return result, results_by_backend(pytester.path / "r.jsonl"), len(paths)


def check_attribution(result, by_backend, faults, n_cases):
    from ddtree_compat.backends.registry import resolve

    names = {spec: resolve([spec])[0].name for spec in faults}
    for spec, (outcome, cls) in faults.items():
        got = by_backend.get(names[spec], [])
        assert len(got) == n_cases, (spec, got)
        assert {(r["outcome"], r["fault_class"]) for r in got} == {(outcome, cls)}, (spec, got)
    good = by_backend["oracle"]
    assert len(good) == n_cases and {r["outcome"] for r in good} == {"pass"}
    result.stdout.fnmatch_lines(["*replacing crashed worker*"])
    all_ids = [r["nodeid"] for rs in by_backend.values() for r in rs]
    assert len(all_ids) == len(set(all_ids)), "a cell was recorded twice"


def test_mixed_cpu_sweep_attributes_every_fault(pytester):
    """One case per backend: each fault crashes, hangs or poisons its worker, and the next backend's cell runs on
    the replacement (two cases doubled the worker restarts for nothing more to check)."""
    result, by_backend, n = mixed_sweep(pytester, CPU_FAULTS, "interpret", timeout=8, cases=1)
    check_attribution(result, by_backend, CPU_FAULTS, n)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*cells: 1 pass, 0 wrong, 0 zero-accept, 4 fault, 0 skip*",
                                 "results: r.jsonl  ->  python -m ddtree_compat report r.jsonl"])


def test_mixed_gpu_sweep_attributes_every_injected_fault(pytester):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the GPU fault injectors run on the device tier only")
    result, by_backend, n = mixed_sweep(pytester, GPU_FAULTS, "device", timeout=30)
    check_attribution(result, by_backend, GPU_FAULTS, n)


def test_sigkill_mid_run_then_resume_loses_nothing(pytester):
    pytester.makepyfile(test_kernel=VERIFY_TEST)
    paths = [str(make_case(b, t, "none", 1).save(pytester.path / "cases"))
             for b in (1, 2, 3, 7, 8) for t in ("spine", "fanout", "balanced")]
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--ddtree-tier=interpret",
            "--ddtree-results=r.jsonl", "--ddtree-backend=ddtree_compat.faultinject:Slow", "-n", "2", "-q"]
    for p in paths:
        base += ["--ddtree-case", p]
    results = pytester.path / "r.jsonl"
    proc = subprocess.Popen(base, cwd=pytester.path, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(scan(results)[0]) < 4:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before, _ = scan(results)
    assert 4 <= len(before) < len(paths), "the kill should land mid-run"
    lines_before = results.read_bytes()

    resumed = subprocess.run([*base, "--ddtree-resume"], cwd=pytester.path, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert f"{len(paths) - len(before)} passed" in resumed.stdout  # only the unfinished cells ran
    after, _ = scan(results)
    assert set(after) >= set(before) and len(after) == len(paths)
    assert results.read_bytes().startswith(lines_before[: lines_before.rfind(b"\n") + 1])  # nothing rewritten
    assert all(r["outcome"] == "pass" for r in after.values())


def test_dist_each_drops_a_crashed_workers_cells_and_resume_runs_them(pytester):
    """The sweep pins one xdist worker per GPU with ``--dist each``; pytest-xdist 3.8 then drops the
    cells a crashed worker had pending. The sweep's resume passes run them: nothing is lost."""
    pytester.makepyfile(test_kernel=VERIFY_TEST)
    paths = [str(make_case(b, "spine", "none", 1).save(pytester.path / "cases")) for b in (3, 8)]
    args = ["-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=r.jsonl", "--ddtree-static=off",
            "--ddtree-backend=oracle", "--ddtree-backend=ddtree_compat.faultinject:Raises", "--dist", "each",
            "--tx", "popen//env:CUDA_VISIBLE_DEVICES=0", "--max-worker-restart=100"]
    for p in paths:
        args += ["--ddtree-case", p]
    pytester.runpytest_subprocess(*args, timeout=300)
    first, _ = scan(pytester.path / "r.jsonl")
    for _ in range(5):
        if len(scan(pytester.path / "r.jsonl")[0]) == 2 * len(paths):
            break
        pytester.runpytest_subprocess(*args, "--ddtree-resume", timeout=300)
    done, _ = scan(pytester.path / "r.jsonl")
    assert len(first) <= len(done) == 2 * len(paths)
    assert sorted((r["backend"], r["outcome"], r["fault_class"]) for r in done.values()) == (
        [("mutant-raises", "fault", "illegal-instruction")] * 2 + [("oracle", "pass", None)] * 2)


def test_a_resume_after_a_torn_line_cuts_it_first_and_says_so(pytester):
    """A crash left the results file torn mid-line: ``--ddtree-resume`` cuts the torn bytes before appending (a
    ``repair`` line records it, the summary says so), so no line is glued onto them and the torn cell runs again."""
    pytester.makepyfile(test_kernel=VERIFY_TEST)
    args = ["-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=r.jsonl", "--ddtree-static=off",
            "--ddtree-backend=oracle"]
    for b in (3, 8):
        args += ["--ddtree-case", str(make_case(b, "spine", "none", 1).save(pytester.path / "cases"))]
    assert pytester.runpytest_subprocess(*args).ret == 0
    results = pytester.path / "r.jsonl"
    data = results.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1  # where the last result line starts
    results.write_bytes(data[:last + 30])
    resumed = pytester.runpytest_subprocess(*args, "--ddtree-resume")
    assert resumed.ret == 0
    resumed.stdout.fnmatch_lines(["*a torn last line (30 bytes at byte *) was cut before appending*", "*1 passed*"])
    lines = [json.loads(x) for x in results.read_text().splitlines()]  # all whole: nothing glued on
    assert [x["at_byte"] for x in lines if x["kind"] == "repair"] == [last]
    cells = [x["nodeid"] for x in lines if x["kind"] == "result"]
    assert len(cells) == len(set(cells)) == 2
