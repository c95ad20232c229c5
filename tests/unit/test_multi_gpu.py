"""One xdist worker per GPU, pinned with CUDA_VISIBLE_DEVICES: a mixed host gives one column per arch."""

import json
import subprocess
import sys

from ddtree_compat.arch import FAKE_ENV, detect_gpus
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.tiers import cap_worker_threads, device_worker_args, pinned_worker_args, worker_cpu_threads


def test_worker_args_pin_each_gpu(monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm90,sm120,sm120")
    assert pinned_worker_args(detect_gpus()) == [
        "--dist", "each", "--tx", "popen//env:CUDA_VISIBLE_DEVICES=0", "--tx", "popen//env:CUDA_VISIBLE_DEVICES=1",
        "--tx", "popen//env:CUDA_VISIBLE_DEVICES=2"]


def test_one_gpu_shares_it_among_load_balanced_workers(monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm90")
    assert device_worker_args(detect_gpus(), cpus=16) == ["-n", "14", "--dist", "worksteal"]
    assert device_worker_args(detect_gpus(), cpus=64) == ["-n", "16", "--dist", "worksteal"]
    assert device_worker_args(detect_gpus(), cpus=6) == ["-n", "4", "--dist", "worksteal"]
    assert device_worker_args(detect_gpus(), cpus=1) == ["-n", "1", "--dist", "worksteal"]
    monkeypatch.setenv(FAKE_ENV, "sm90,sm90")
    assert device_worker_args(detect_gpus(), cpus=16)[:2] == ["--dist", "each"]


def test_workers_split_the_cores_instead_of_each_spinning_on_all():
    assert worker_cpu_threads(8, cpus=16) == 2
    assert worker_cpu_threads(4, cpus=2) == 1
    assert worker_cpu_threads(1, cpus=16) == 16


def test_thread_cap_only_in_workers_and_never_over_the_user(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert cap_worker_threads(None) is None
        assert cap_worker_threads({"workercount": 10_000}) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert cap_worker_threads({"workercount": 2}) is None
    finally:
        torch.set_num_threads(before)


def test_worker_args_honour_this_process_visible_devices(monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm90,sm120,sm121,sm100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    gpus = detect_gpus()  # what CUDA would show: physical 3 then 1, renumbered 0 and 1
    assert [(g.index, g.arch, g.fake) for g in gpus] == [(0, "sm100", True), (1, "sm120", True)]
    assert pinned_worker_args(gpus)[2:] == ["--tx", "popen//env:CUDA_VISIBLE_DEVICES=3",
                                            "--tx", "popen//env:CUDA_VISIBLE_DEVICES=1"]


def test_sweep_on_a_mixed_host_pins_one_worker_per_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(FAKE_ENV, "sm90,sm120")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # set by this (interpret-tier) session; a GPU host has none
    case = make_case(8, "spine", "deep", 3).save(tmp_path / "cases")
    from ddtree_compat.cli import KERNEL_TESTS

    verify_tests = KERNEL_TESTS / "test_verify.py"
    r = subprocess.run([sys.executable, "-m", "ddtree_compat", "sweep", "--out-dir", str(tmp_path), "--name", "mixed",
                        "--tests", str(verify_tests), "--", "--ddtree-case", str(case), "-k", "not drawn_trees",
                        "--ddtree-static=off"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "--dist each --tx popen//env:CUDA_VISIBLE_DEVICES=0 --tx popen//env:CUDA_VISIBLE_DEVICES=1" in r.stdout
    lines = [json.loads(x) for x in (tmp_path / "mixed.jsonl").read_text().splitlines()]
    envs = {x["env_id"]: x for x in lines if x["kind"] == "env"}
    # one env line per worker, each seeing only the GPU it was pinned to (as index 0)
    assert sorted((e["cuda_visible_devices"], [g["arch"] for g in e["gpus"]]) for e in envs.values()) == [
        ("0", ["sm90"]), ("1", ["sm120"])]
    results = [x for x in lines if x["kind"] == "result"]
    by_arch = {}
    for x in results:
        by_arch.setdefault(x["arch"], set()).add((x["backend"], envs[x["env_id"]]["cuda_visible_devices"]))
    assert by_arch == {"sm90": {("oracle", "0"), ("sglang-triton", "0"), ("sglang-cuda", "0")},
                       "sm120": {("oracle", "1"), ("sglang-triton", "1"), ("sglang-cuda", "1")}}
    assert all(x["outcome"] == "skip" and "DDTREE_FAKE_GPUS" in x["message"] for x in results)
    md = (tmp_path / "mixed.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| table |"))
    assert header == "| table | kernel | backend | sm90 | sm120 |"  # one column per arch of the mixed host
    cells = next(line for line in md.splitlines() if line.startswith("| matrix | verify_tree_greedy | sglang-triton |"))
    assert cells.count("⏭") == 2, cells
    assert (tmp_path / "mixed.html").exists() and (tmp_path / "mixed.png").read_bytes()[:4] == b"\x89PNG"
