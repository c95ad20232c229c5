"""Bad input, tabulated: every subcommand (and the pytest plugin) answers each with one line on stderr, no
traceback, the documented exit status (``ddtree_compat/exitcodes.py``: 2 for the CLI; pytest's own 4 for plain
pytest), and nothing written or lost in the folder it ran in."""

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from ddtree_compat.families.verify.records import make_case
from ddtree_compat.exitcodes import Exit
from ddtree_compat.families.commit.records import commit_cases
from ddtree_compat.families.ddtree.records import DDTreeCase
from ddtree_compat.families.linear.records import linear_cases
from ddtree_compat.processes import group_alive
from tests.envs import own_env

CLI = [sys.executable, "-m", "ddtree_compat"]
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", "test_x.py"]
USAGE, PYTEST_USAGE = int(Exit.USAGE), int(pytest.ExitCode.USAGE_ERROR)

LINEAR = linear_cases("interpret")[0]
RESULT = {"kind": "result", "kernel": "verify_tree_greedy", "tier": "interpret", "backend": "oracle",
          "arch": "interpret", "case_id": "b8-spine-deep-bs3", "outcome": "pass", "budget": 8, "topology": "spine",
          "plant": "deep", "batch": 3, "block_size": 16, "mode": "spine", "env_id": "e1"}


def _lines(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def _workspace(root: Path) -> None:
    """The files the bad inputs point at."""
    env = {"kind": "env", "env_id": "e1", "tier": "interpret", "gpus": []}
    case = make_case(8, "spine", "deep", 3)
    files = {
        "good.jsonl": _lines(env, RESULT),
        "notjsonl.txt": "hello\n",
        "binary.bin": bytes(range(256)),
        "binary.json": bytes(range(256)),
        "broken.jsonl.gz": b"not gzip at all",
        "empty.jsonl": _lines(env),
        "kind.jsonl": _lines({"kind": "weird"}),
        "wrongtype.jsonl": _lines(env, {**RESULT, "budget": "eight"}),
        "missing.jsonl": _lines(env, {"kind": "result", "backend": "oracle"}),
        "outcome.jsonl": _lines(env, {**RESULT, "outcome": "great"}),
        "case.json": case.to_json(),
        "budget.json": json.dumps({**json.loads(case.to_json()), "budget": "8"}),
        "parent.json": json.dumps({**json.loads(case.to_json()), "requests": [
            {**json.loads(case.to_json())["requests"][0], "parents": ["x"]}]}),
        "notjson.json": "{",
        "schema.json": json.dumps({"schema": "someone-else/1"}),
        "commit.json": commit_cases((case,))[0].to_json(),
        "ddtree_budget.json": json.dumps({**json.loads(DDTreeCase(8).to_json()), "budget": "8"}),
        "linear_dtype.json": json.dumps({**json.loads(LINEAR.to_json()), "state_dtype": "fp8"}),
        "linear_heads.json": json.dumps({**json.loads(LINEAR.to_json()), "key_heads": 3, "value_heads": 4}),
        "afile": "a file, not a folder\n",
        "out/earlier.jsonl": "not ours\n",
        "out/binary.jsonl": bytes(range(256)),
        "out/kept.jsonl": _lines(env, RESULT),
        "test_x.py": "def test_x():\n    assert True\n",
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "adir").mkdir()


# (id, argv, exit status, words in the one stderr line)
CASES = [
    # report
    ("report-missing-file", CLI + ["report", "MISSING.jsonl"], USAGE, "field 'path' = 'MISSING.jsonl'"),
    ("report-not-jsonl", CLI + ["report", "notjsonl.txt"], USAGE, "not JSON"),
    ("report-binary", CLI + ["report", "binary.bin"], USAGE, "field 'path' = 'binary.bin': binary, not text"),
    ("report-broken-gzip", CLI + ["report", "broken.jsonl.gz"], USAGE, "field 'path' = 'broken.jsonl.gz'"),
    ("report-no-result-line", CLI + ["report", "empty.jsonl"], USAGE, "no cells in empty.jsonl"),
    ("report-unknown-kind", CLI + ["report", "kind.jsonl"], USAGE, "unknown line kind"),
    ("report-wrong-type", CLI + ["report", "wrongtype.jsonl"], USAGE, "field 'budget' = 'eight': wrong type"),
    ("report-missing-field", CLI + ["report", "missing.jsonl"], USAGE, "missing"),
    ("report-unknown-outcome", CLI + ["report", "outcome.jsonl"], USAGE, "unknown outcome"),
    ("report-output-is-a-folder", CLI + ["report", "good.jsonl", "-o", "adir"], USAGE, "adir"),
    ("report-html-under-a-file", CLI + ["report", "good.jsonl", "-o", "m.md", "--html", "afile/m.html"], USAGE,
     "afile"),
    ("report-no-file", CLI + ["report"], USAGE, "the following arguments are required: results"),
    # diff
    ("diff-missing-file", CLI + ["diff", "MISSING.jsonl", "good.jsonl"], USAGE, "field 'path' = 'MISSING.jsonl'"),
    ("diff-not-jsonl", CLI + ["diff", "good.jsonl", "notjsonl.txt"], USAGE, "not JSON"),
    ("diff-output-is-a-folder", CLI + ["diff", "good.jsonl", "good.jsonl", "-o", "adir"], USAGE, "adir"),
    ("diff-limit-not-a-number", CLI + ["diff", "good.jsonl", "good.jsonl", "--limit", "x"], USAGE,
     "argument --limit: invalid int value: 'x'"),
    ("diff-unknown-backend", CLI + ["diff", "good.jsonl", "good.jsonl", "--backend", "nope"], USAGE,
     "field '--backend' = 'nope': no cell of that backend on either side; allowed: oracle"),
    ("diff-unknown-kernel", CLI + ["diff", "good.jsonl", "good.jsonl", "--kernel", "nope"], USAGE,
     "field '--kernel' = 'nope': no cell of that kernel on either side; allowed: verify_tree_greedy"),
    # cases
    ("preflight-unknown-arch", CLI + ["preflight", "--arch", "sm1x", "--", "--model-path", "m"], USAGE,
     "field '--arch' = 'sm1x'"),
    ("preflight-bad-sampling", CLI + ["preflight", "--sampling", "hot", "--", "--model-path", "m"], USAGE,
     "field '--sampling' = 'hot'"),
    ("preflight-no-launch-flags", CLI + ["preflight"], USAGE, "no launch flags"),
    ("preflight-flag-sglang-rejects", CLI + ["preflight", "--", "--model-path", "m", "--no-such-flag"], USAGE,
     "SGLang rejected the launch flags: unrecognized arguments: --no-such-flag"),
    ("preflight-model-path-no-folder", CLI + ["preflight", "--", "--model-path", "org/model"], USAGE,
     "is no local folder: give its config.json with --model-config"),
    ("preflight-ddtree-on-a-release", CLI + ["preflight", "--", "--model-path", "m", "--speculative-algorithm",
                                             "DDTREE"], USAGE, "point DDTREE_IMPLS"),
    ("cases-unknown-profile", CLI + ["cases", "--profile", "huge"], USAGE, "field 'profile' = 'huge'"),
    ("cases-unknown-kernel", CLI + ["cases", "--kernel", "bogus"], USAGE, "field '--kernel' = 'bogus': not a kernel"),
    ("cases-unknown-attention-profile", CLI + ["cases", "--attention", "huge"], USAGE, "invalid choice: 'huge'"),
    ("cases-write-into-a-file", CLI + ["cases", "--write", "afile"], USAGE, "afile"),
    # replay
    ("replay-missing-file", CLI + ["replay", "MISSING.json", "--backend", "oracle"], USAGE, "field 'path'"),
    ("replay-binary-case", CLI + ["replay", "binary.json", "--backend", "oracle"], USAGE, "binary, not text"),
    ("replay-budget-a-string", CLI + ["replay", "budget.json", "--backend", "oracle"], USAGE,
     "field 'budget' = '8': wrong type"),
    ("replay-parent-a-string", CLI + ["replay", "parent.json", "--backend", "oracle"], USAGE,
     "field 'parents' = 'x': wrong type"),
    ("replay-ddtree-budget-a-string", CLI + ["replay", "ddtree_budget.json", "--backend", "oracle"], USAGE,
     "ddtree_budget.json"),
    ("replay-not-json", CLI + ["replay", "notjson.json", "--backend", "oracle"], USAGE, "not a case file"),
    ("replay-linear-unknown-state-dtype", CLI + ["replay", "linear_dtype.json", "--backend", "oracle", "--kernel",
                                                 "gdn_verify_tree"], USAGE,
     "field 'state_dtype' = 'fp8': unknown state dtype; allowed: fp32, bf16"),
    ("replay-linear-bad-head-geometry", CLI + ["replay", "linear_heads.json", "--backend", "oracle", "--kernel",
                                               "gdn_verify_tree"], USAGE, "bad head geometry"),
    ("replay-other-schema", CLI + ["replay", "schema.json", "--backend", "oracle"], USAGE,
     "field 'schema' = 'someone-else/1'"),
    ("replay-unknown-backend", CLI + ["replay", "case.json", "--backend", "nope"], USAGE, "field '--backend' = 'nope'"),
    ("replay-unknown-kernel", CLI + ["replay", "case.json", "--backend", "oracle", "--kernel", "bogus"], USAGE,
     "field '--kernel' = 'bogus'"),
    ("replay-commit-case-without-kernel", CLI + ["replay", "commit.json", "--backend", "oracle"], USAGE,
     "field '--kernel' is missing: a CommitCase feeds several kernels"),
    ("replay-unknown-id", CLI + ["replay", "b8-spine-nowhere-bs3", "--backend", "oracle"], USAGE,
     "field 'case' = 'b8-spine-nowhere-bs3': not found"),
    ("replay-id-unknown-profile", CLI + ["replay", "b8-spine-deep-bs3", "--backend", "oracle", "--profile", "huge"],
     USAGE, "field 'profile' = 'huge'"),
    ("replay-device-without-gpu", CLI + ["replay", "case.json", "--backend", "oracle", "--tier", "device"], USAGE,
     "no GPU"),
    ("replay-gpu-not-a-number", CLI + ["replay", "case.json", "--backend", "oracle", "--gpu", "x"], USAGE,
     "argument --gpu: invalid int value: 'x'"),
    ("replay-no-backend", CLI + ["replay", "case.json"], USAGE, "the following arguments are required: --backend"),
    # sweep (checked before anything runs)
    ("sweep-device-without-gpu", CLI + ["sweep", "--tier", "device", "--out-dir", "out"], USAGE, "no GPU"),
    ("sweep-unknown-tier", CLI + ["sweep", "--tier", "gpu", "--out-dir", "out"], USAGE, "invalid choice: 'gpu'"),
    ("sweep-unknown-profile", CLI + ["sweep", "--profile", "huge", "--out-dir", "out"], USAGE,
     "field '--profile' = 'huge'"),
    ("sweep-unknown-profile-from-the-environment", ["env", "DDTREE_PROFILE=huge", *CLI, "sweep", "--out-dir", "out"],
     USAGE, "field 'DDTREE_PROFILE' = 'huge'"),
    ("sweep-no-implementation-from-the-environment", ["env", "DDTREE_IMPLS=nowhere", *CLI, "sweep", "--out-dir",
                                                      "out"], USAGE, "field 'DDTREE_IMPLS' = 'nowhere'"),
    ("sweep-unknown-backend", CLI + ["sweep", "--backend", "nope", "--out-dir", "out"], USAGE,
     "field '--backend' = 'nope'"),
    ("sweep-unknown-arch-marker", CLI + ["sweep", "--out-dir", "out", "--", "-m", "sm999"], USAGE,
     "unknown arch marker 'sm999'; allowed: the arch markers sm80, sm86"),
    ("sweep-malformed-marker-expression", CLI + ["sweep", "--out-dir", "out", "--", "-m", "sm120 and"], USAGE,
     "field '-m' = 'sm120 and': does not parse at column 10"),
    ("sweep-malformed-keyword-expression", CLI + ["sweep", "--out-dir", "out", "--", "-k", "b8 or"], USAGE,
     "field '-k' = 'b8 or': does not parse"),
    ("sweep-earlier-sweeps-name", CLI + ["sweep", "--out-dir", "out", "--name", "kept"], USAGE,
     "field '--name' = 'out/kept.jsonl': an earlier sweep's file: not replaced; allowed: a new name, or --replace"),
    ("sweep-out-dir-read-only", CLI + ["sweep", "--out-dir", "ro"], USAGE,
     "field '--out-dir' = 'ro': cannot write there: Read-only file system"),
    ("sweep-out-dir-under-a-read-only-folder", CLI + ["sweep", "--out-dir", "ro/results"], USAGE,
     "field '--out-dir' = 'ro/results': cannot write ro: Read-only file system"),
    ("sweep-resume-a-file-not-ours", CLI + ["sweep", "--out-dir", "out", "--name", "earlier", "--resume"], USAGE,
     "field '--resume' = 'out/earlier.jsonl': line 1: not JSON"),
    ("sweep-resume-a-binary-file", CLI + ["sweep", "--out-dir", "out", "--name", "binary", "--resume"], USAGE,
     "field '--resume' = 'out/binary.jsonl': binary, not text"),
    ("sweep-resume-nothing", CLI + ["sweep", "--out-dir", "out", "--name", "typo.jsonl", "--resume"], USAGE,
     "field '--resume' = 'out/typo.jsonl': nothing to resume"),
    ("sweep-missing-tests", CLI + ["sweep", "--out-dir", "out", "--tests", "nowhere"], USAGE, "field '--tests'"),
    ("sweep-out-dir-is-a-file", CLI + ["sweep", "--out-dir", "afile"], USAGE, "field '--out-dir' = 'afile'"),
    ("sweep-bad-worker-count", CLI + ["sweep", "--out-dir", "out", "-n", "zero"], USAGE, "field '-n' = 'zero'"),
    ("sweep-bad-timeout", CLI + ["sweep", "--out-dir", "out", "--timeout", "0"], USAGE, "field '--timeout' = 0"),
    ("sweep-bad-resume-passes", CLI + ["sweep", "--out-dir", "out", "--resume-passes", "-1"], USAGE,
     "field '--resume-passes' = -1"),
    ("sweep-pytest-finds-a-bad-option", CLI + ["sweep", "--out-dir", "out", "--name", "kept", "--replace", "-n", "1",
                                               "--", "--ddtree-progress=soon"], USAGE,
     "field '--ddtree-progress' = 'soon'"),
    # the pytest plugin (pytest's own usage-error status)
    ("pytest-unknown-arch-marker-under-xdist", PYTEST + ["-m", "sm999", "-n", "2"], PYTEST_USAGE,
     "unknown arch marker 'sm999'"),
    ("pytest-resume-a-file-not-ours", PYTEST + ["--ddtree-resume", "--ddtree-results=notjsonl.txt"], PYTEST_USAGE,
     "field '--ddtree-results' = 'notjsonl.txt'"),
    ("pytest-append-to-a-gzip", PYTEST + ["--ddtree-results=broken.jsonl.gz"], PYTEST_USAGE, "gzipped"),
    ("pytest-unknown-backend", PYTEST + ["--ddtree-backend=bogus"], PYTEST_USAGE, "field '--ddtree-backend' = 'bogus'"),
    ("pytest-bad-progress", PYTEST + ["--ddtree-progress=x"], PYTEST_USAGE, "field '--ddtree-progress' = 'x'"),
    ("pytest-bad-progress-from-the-environment", ["env", "DDTREE_PROGRESS=x", *PYTEST, "--ddtree-tier=interpret"],
     PYTEST_USAGE, "field 'DDTREE_PROGRESS' = 'x'"),
    ("pytest-no-implementation-from-the-environment", ["env", "DDTREE_IMPLS=nowhere", *PYTEST,
                                                       "--ddtree-tier=interpret"], PYTEST_USAGE,
     "field 'DDTREE_IMPLS' = 'nowhere'"),
    ("pytest-malformed-marker-expression-under-xdist", PYTEST + ["-m", "sm120 and", "-n", "2"], PYTEST_USAGE,
     "field '-m' = 'sm120 and': does not parse"),
    ("pytest-results-read-only", PYTEST + ["--ddtree-results=ro/r.jsonl"], PYTEST_USAGE,
     "field '--ddtree-results' = 'ro/r.jsonl': cannot write ro: Read-only file system"),
]


@contextmanager
def read_only(folder: Path):
    """``folder``, made read-only for this user: a read-only tmpfs mounted there as root (root writes through
    permission bits), else its mode. Skips where neither can be had (root without the right to mount)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                                 capture_output=True, text=True)
        if mounted.returncode:
            pytest.skip(f"no read-only folder for root here (mount: {mounted.stderr.strip()})")
        try:
            yield folder
        finally:
            subprocess.run(["umount", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_there_are_at_least_34_and_every_subcommand_has_some():
    assert len(CASES) >= 34 and len({c[0] for c in CASES}) == len(CASES)
    for command in ("report", "diff", "cases", "replay", "sweep", "preflight", "pytest"):
        assert sum(c[0].startswith(command) for c in CASES) >= 3, command


@pytest.mark.parametrize("argv, status, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_one_line_and_its_exit_status(tmp_path, argv, status, words):
    _workspace(tmp_path)
    with read_only(tmp_path / "ro") if any(a == "ro" or "ro/" in a for a in argv) else _nothing():
        before = _snapshot(tmp_path)
        env = own_env()
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        run = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        stdout, stderr = run.communicate(timeout=600)
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        assert run.returncode == status, stdout[-2000:] + stderr[-2000:]
        assert len(lines) == 1 and words in lines[0], stderr
        assert "Traceback" not in stdout + stderr
        assert not group_alive(run.pid), "a process it started is still running"
        assert _snapshot(tmp_path) == before  # nothing written, nothing removed or changed


@contextmanager
def _nothing():
    yield


def test_a_sweep_into_a_read_only_folder_says_so_in_one_line_and_leaves_no_process(tmp_path):
    """Checked before pytest starts: one line, exit 2, and no process of the sweep alive afterwards (pytest's
    internal error there once left the grid's build processes running)."""
    with read_only(tmp_path / "ro") as ro:
        sweep = subprocess.Popen(CLI + ["sweep", "--out-dir", str(ro)], cwd=tmp_path, env=own_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        out, err = sweep.communicate(timeout=900)
        assert sweep.returncode == USAGE and len(err.strip().splitlines()) == 1, out[-2000:] + err[-2000:]
        assert f"field '--out-dir' = '{ro}': cannot write there: Read-only file system" in err
        assert not group_alive(sweep.pid), "a process of the sweep outlived it"


def test_after_a_usage_error_pytest_says_it_alone(tmp_path):
    """A usage error pytest finds itself (a test path that is not there) is its line alone: no ``-m <arch>``
    summary of cells that never ran."""
    _workspace(tmp_path)
    r = subprocess.run(PYTEST + ["-m", "sm120", "nowhere.py"], cwd=tmp_path, env=own_env(), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == PYTEST_USAGE and "nowhere.py" in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert "GPU on this host" not in r.stdout and "ran here" not in r.stdout, r.stdout
