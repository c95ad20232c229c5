"""The exit-status table held for every subcommand's outcomes other than bad input (those:
``test_bad_input.py``): ok, failed, nothing ran, and how a sweep maps pytest's statuses."""

import json
import subprocess
import sys

import pytest

from ddtree_compat.families.verify.records import make_case
from ddtree_compat.exitcodes import TABLE, Exit, combine, from_pytest

RESULT = {"kind": "result", "kernel": "verify_tree_greedy", "tier": "interpret", "backend": "oracle",
          "arch": "interpret", "case_id": "b8-spine-deep-bs3", "outcome": "pass", "env_id": "e1"}


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ddtree_compat", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def test_help_ends_with_every_status_and_its_meaning(tmp_path):
    """An installed wheel has no docs/: ``--help`` itself says what each status means."""
    out = cli("--help", cwd=tmp_path)
    assert out.returncode == 0
    help_text = " ".join(out.stdout.split())
    for status, meaning in TABLE:
        assert f"{int(status)} {status.name.lower()}: {' '.join(meaning.replace('`', '').split())}" in help_text


def test_each_subcommand_s_help_points_at_the_statuses_and_names_the_built_in_backends():
    from ddtree_compat.backends.registry import BUILTIN
    from ddtree_compat.cli import BACKENDS, SEE_EXIT_STATUSES, build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert sorted(commands) == ["cases", "diff", "envelope", "preflight", "replay", "report", "sweep"]
    assert all(sub.epilog == SEE_EXIT_STATUSES for sub in commands.values())
    assert [name for name in BUILTIN if name not in BACKENDS] == []


def test_every_status_has_a_meaning_and_pytest_s_map_onto_them():
    assert [int(e) for e, _ in TABLE] == [int(e) for e in Exit] == [0, 1, 2, 3, 4, 5, 130]
    from ddtree_compat.gate import EXIT_NOT_COMPARED, EXIT_REGRESSED

    assert (EXIT_REGRESSED, EXIT_NOT_COMPARED) == (Exit.FAILED, Exit.NOT_COMPARED)  # the gate's, in the table
    assert [from_pytest(s) for s in range(6)] == [Exit.OK, Exit.FAILED, Exit.INTERRUPTED, Exit.INTERNAL, Exit.USAGE,
                                                  Exit.NOTHING_RAN]
    assert from_pytest(-9) == Exit.INTERNAL  # a killed pytest
    assert combine([Exit.OK, Exit.NOTHING_RAN]) == Exit.OK and combine([Exit.NOTHING_RAN]) == Exit.NOTHING_RAN
    assert combine([Exit.FAILED, Exit.USAGE]) == Exit.USAGE and combine([]) == Exit.NOTHING_RAN


@pytest.mark.parametrize("backend, extra, status, first", [
    ("oracle", [], Exit.OK, "pass: oracle verify_tree_greedy"),
    ("ddtree_compat.families.verify.variants:ZeroAccept", [], Exit.FAILED, "zero-accept: mutant-zero-accept"),
    ("sglang-cuda", [], Exit.NOTHING_RAN, "skip: sglang-cuda on interpret"),
    ("sglang-cuda", ["--allow-skip"], Exit.OK, "skip: sglang-cuda on interpret"),
])
def test_replay_exits_by_its_verdict(tmp_path, backend, extra, status, first):
    case = make_case(8, "spine", "deep", 3).save(tmp_path)
    r = cli("replay", case, "--backend", backend, "--tier", "interpret", *extra, cwd=tmp_path)
    assert r.returncode == status and r.stdout.startswith(first), r.stdout + r.stderr


def test_report_and_cases_exit_0_and_diff_1_on_a_regression(tmp_path):
    env = {"kind": "env", "env_id": "e1"}
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text(json.dumps(env) + "\n" + json.dumps(RESULT) + "\n")
    after.write_text(json.dumps(env) + "\n" + json.dumps({**RESULT, "outcome": "wrong"}) + "\n")
    assert cli("report", before, "-o", "m.md", cwd=tmp_path).returncode == Exit.OK
    assert cli("diff", before, before, cwd=tmp_path).returncode == Exit.OK
    assert cli("diff", before, after, cwd=tmp_path).returncode == Exit.FAILED
    assert cli("cases", "--attention", "interpret", cwd=tmp_path).returncode == Exit.OK


def test_a_sweep_that_selects_no_cell_says_nothing_ran(tmp_path):
    from ddtree_compat.cli import KERNEL_TESTS

    r = cli("sweep", "--tier", "interpret", "--out-dir", "out", "--name", "none", "-n", "1",
            "--tests", KERNEL_TESTS / "test_verify_attention.py", "--", "-k", "no-such-cell", cwd=tmp_path)
    assert r.returncode == Exit.NOTHING_RAN, r.stdout[-2000:] + r.stderr[-2000:]
    assert "tier interpret: nothing ran (exit 5)" in r.stdout
