"""The sweep command's own logic: which pytest exits start a resume pass, the order of test files, and the names
of its files (a name per run, an earlier one refused unless asked, ``latest-*`` links, ``--replace``)."""

import os
import subprocess
import sys
from pathlib import Path

from ddtree_compat.cli import _run_with_resume_passes, _sweep_targets


def counting_cmd(tmp_path: Path, exits: list[int]) -> list[str]:
    """A command that exits with ``exits[k]`` on its k-th run and logs its argv."""
    script = tmp_path / "fake_pytest.py"
    script.write_text(
        "import json, sys, pathlib\n"
        f"log = pathlib.Path({str(tmp_path / 'calls.jsonl')!r})\n"
        "n = len(log.read_text().splitlines()) if log.exists() else 0\n"
        "log.open('a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({exits!r}[min(n, {len(exits) - 1})])\n")
    return [sys.executable, str(script)]


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.jsonl").read_text().splitlines()


def test_usage_errors_and_interrupts_are_not_retried(tmp_path):
    for code in (2, 3, 4, 0, 5):
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)
        assert _run_with_resume_passes(counting_cmd(tmp_path, [code]), "interpret", 5) == code
        assert len(calls(tmp_path)) == 1


def test_failures_resume_until_no_cell_is_left(tmp_path, capsys):
    cmd = counting_cmd(tmp_path, [1, 1, 5])
    assert _run_with_resume_passes(cmd, "device", 5) == 1  # the first pass's verdict is kept
    runs = calls(tmp_path)
    assert len(runs) == 3 and "--ddtree-resume" not in runs[0] and all("--ddtree-resume" in r for r in runs[1:])
    out = capsys.readouterr().out
    assert "resume pass 1: running the cells without a result line" in out and "resume pass 2: pytest exit 5" in out


def test_every_pass_runs_with_the_sweeps_report_variable(tmp_path):
    """The sweep writes the report itself, so each pytest pass it runs is told (its summary then offers none)."""
    from ddtree_compat.results import REPORT_BY_SWEEP

    script = tmp_path / "env_probe.py"
    script.write_text("import os, sys\n"
                      f"open({str(tmp_path / 'seen.txt')!r}, 'a').write(os.environ.get({REPORT_BY_SWEEP!r}, '-') + '\\n')\n"
                      "sys.exit(1)\n")
    assert _run_with_resume_passes([sys.executable, str(script)], "interpret", 1) == 1
    assert (tmp_path / "seen.txt").read_text().splitlines() == ["1", "1"]  # the first pass and its resume


def test_failures_stop_after_the_pass_limit(tmp_path):
    assert _run_with_resume_passes(counting_cmd(tmp_path, [1]), "device", 2) == 1
    assert len(calls(tmp_path)) == 3


def test_verify_grid_runs_first(tmp_path):
    for name in ("test_commit.py", "test_graph_padded.py", "test_verify.py", "test_static.py", "helper.py"):
        (tmp_path / name).write_text("")
    assert [Path(p).name for p in _sweep_targets(tmp_path)] == [
        "test_verify.py", "test_commit.py", "test_graph_padded.py", "test_static.py"]
    assert _sweep_targets(tmp_path / "test_commit.py") == [str(tmp_path / "test_commit.py")]


def test_ignored_files_stay_out_of_the_sweep(tmp_path):
    for name in ("test_commit.py", "test_verify.py", "test_verify_attention.py", "test_static.py"):
        (tmp_path / name).write_text("")
    args = [f"--ignore={tmp_path / 'test_verify_attention.py'}", "--ignore", str(tmp_path / "test_static.py"), "-x"]
    assert [Path(p).name for p in _sweep_targets(tmp_path, args)] == ["test_verify.py", "test_commit.py"]


CONTROLLER_PROBE = """
import sys


def pytest_sessionfinish(session):
    role = "worker" if hasattr(session.config, "workerinput") else "controller"
    print(f"{role} imported torch: {'torch' in sys.modules}")
"""


def test_the_input_checks_and_the_xdist_controller_import_no_torch(pytester, verify_suite):
    """The sweep's input checks and pytest's xdist controller load every backend adapter and run none: they
    must not pay torch's import (seconds in every CLI call and every contained session; the containment
    aim)."""
    checks = ("from ddtree_compat.cli import build_parser, _sweep_inputs; import sys; "
              "_sweep_inputs(build_parser().parse_args(['sweep', '--tier', 'interpret'])); "
              "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", checks], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["False"], out.stderr[-2000:]
    pytester.makeconftest(CONTROLLER_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=",
                                           "--ddtree-static=off", "--ddtree-case", str(verify_suite), "-n", "1", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*controller imported torch: False*"])


def _args(*argv: str):
    from ddtree_compat.cli import build_parser

    args = build_parser().parse_args(["sweep", *argv])
    args.profile = args.profile or "default"
    return args


def test_each_sweep_gets_its_own_name_and_an_earlier_one_is_refused_unless_asked(tmp_path):
    """Without --name a second sweep of the day takes the next free name; --name of an earlier sweep's file is
    refused in one line naming --replace, unless --replace, --resume or --append says what to do with it."""
    import time

    import pytest

    from ddtree_compat.cli import _sweep_stem
    from ddtree_compat.errors import DDTreeInputError

    day = time.strftime("%Y-%m-%d")
    assert _sweep_stem(_args(), tmp_path, "cpu") == f"{day}-cpu-default"
    (tmp_path / f"{day}-cpu-default.png").write_bytes(b"")  # any file of a run holds its name
    assert _sweep_stem(_args(), tmp_path, "cpu") == f"{day}-cpu-default-2"
    (tmp_path / f"{day}-cpu-default-2.jsonl").write_text("")
    assert _sweep_stem(_args(), tmp_path, "cpu") == f"{day}-cpu-default-3"
    assert _sweep_stem(_args("--resume"), tmp_path, "cpu") == f"{day}-cpu-default-2"  # the newest run's
    assert _sweep_stem(_args("--replace"), tmp_path, "cpu") == f"{day}-cpu-default"
    (tmp_path / "gate.jsonl").write_text("")
    with pytest.raises(DDTreeInputError, match=r"field '--name' = '.*gate.jsonl': an earlier sweep's file: not "
                                               r"replaced; allowed: a new name, or --replace"):
        _sweep_stem(_args("--name", "gate"), tmp_path, "cpu")
    for flag in ("--replace", "--resume", "--append"):
        assert _sweep_stem(_args("--name", "gate.jsonl", flag), tmp_path, "cpu") == "gate"
    with pytest.raises(DDTreeInputError, match="nothing to resume"):
        _sweep_stem(_args("--resume"), tmp_path, "sm90")


def test_resume_without_a_name_continues_the_newest_run_also_after_midnight(tmp_path):
    from ddtree_compat.sweep_files import newest_stem

    for name in ("2026-12-03-cpu-default-2", "2026-12-03-cpu-default-10", "2026-12-02-cpu-default-11",
                 "2026-12-04-cpu-full", "2026-12-04-sm90-default"):
        (tmp_path / f"{name}.jsonl").write_text("")
    (tmp_path / "latest-cpu-default.jsonl").symlink_to("2026-12-02-cpu-default-11.jsonl")
    assert newest_stem(tmp_path, "cpu", "default") == "2026-12-03-cpu-default-10"
    assert newest_stem(tmp_path / "none", "cpu", "default") is None


def test_the_latest_links_name_one_run(tmp_path):
    from ddtree_compat.sweep_files import point_latest

    for suffix in (".jsonl", ".md", ".html", ".png"):
        (tmp_path / f"a{suffix}").write_text(suffix)
    point_latest(tmp_path, "a", "cpu", "default")
    for suffix in (".jsonl", ".md", ".html"):
        (tmp_path / f"b{suffix}").write_text(suffix)
    made = point_latest(tmp_path, "b", "cpu", "default")  # b drew no picture: a's is not linked as b's
    assert sorted(p.name for p in made) == ["latest-cpu-default.html", "latest-cpu-default.jsonl",
                                            "latest-cpu-default.md"]
    assert {p.name: os.readlink(p) for p in tmp_path.glob("latest-*")} == {
        "latest-cpu-default.jsonl": "b.jsonl", "latest-cpu-default.md": "b.md", "latest-cpu-default.html": "b.html"}


def test_replace_puts_the_earlier_run_back_when_nothing_ran(tmp_path):
    from ddtree_compat.sweep_files import discard, restore, set_aside

    (tmp_path / "gate.jsonl").write_text("earlier")
    (tmp_path / "gate-cases").mkdir()
    (tmp_path / "gate-cases" / "c.json").write_text("{}")
    aside = set_aside(tmp_path, "gate")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gate.replaced"]
    restore(aside)
    assert (tmp_path / "gate.jsonl").read_text() == "earlier" and (tmp_path / "gate-cases" / "c.json").exists()
    discard(set_aside(tmp_path, "gate"))
    assert not list(tmp_path.iterdir()) and set_aside(tmp_path, "gate") is None


def test_the_sweeps_pytest_config_filters_the_warnings_the_checkouts_does():
    """``tests/kernels/sweep.ini`` (the sweep's, shipped) and the checkout's ``pytest.ini`` hide the same warnings (the
    checkout's own benchmarks' line aside): a warning the test command explains away must not show in the main job."""
    import configparser

    def filters(path):
        ini = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",), inline_comment_prefixes=None)
        ini.read(path)
        return {line.strip() for line in ini["pytest"]["filterwarnings"].splitlines() if line.strip()}

    root = Path(__file__).resolve().parents[2]
    checkout = filters(root / "pytest.ini") - {"ignore:Benchmarks are automatically disabled"}
    assert filters(root / "tests" / "kernels" / "sweep.ini") == checkout
