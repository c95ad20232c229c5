"""The envelope from a results file's deployment-shape cells (largest batch verified, first failing), the
bisection's next probe, the report's table and picture, and the upgrade gate's envelope comparison."""

from __future__ import annotations

import pytest

from ddtree_compat import gate
from ddtree_compat.families.scale.envelope import envelopes, probe, shrunk
from ddtree_compat.families.scale.records import ScaleCase
from ddtree_compat.results import ResultRecord, Results

KERNEL = "tree_speculative_sampling@scale"


def _cell(batch: int, outcome: str, backend: str = "sglang-cuda", message: str = "") -> ResultRecord:
    case = ScaleCase("tree_speculative_sampling", batch, 248320, 16)
    return ResultRecord(kernel=KERNEL, tier="device", backend=backend, arch="sm90", case_id=case.id, outcome=outcome,
                        **case.coordinates(), message=message, nodeid=f"node-{batch}", case_path=f"/c/{batch}.json")


def _results(*records) -> Results:
    return Results(envs={}, records=list(records))


def test_the_envelope_is_the_largest_pass_below_the_first_failure():
    (e,) = envelopes([_cell(508, "pass"), _cell(509, "fault"), _cell(1017, "pass"), _cell(1018, "wrong")])
    assert (e.verified, e.first_bad, e.outcome) == (508, 509, "fault")
    assert e.verdict == "508 / fault at 509" and not e.gap and probe(e) is None
    (clean,) = envelopes([_cell(508, "pass"), _cell(509, "pass"), _cell(4000, "skip", message="does not fit")])
    assert clean.first_bad is None and clean.verdict == "verified to 509" and clean.skipped == 1


def test_the_bisection_probes_the_middle_of_the_gap_and_the_case_it_runs_is_that_shape():
    (e,) = envelopes([_cell(100, "pass"), _cell(509, "wrong")])
    assert e.gap and probe(e) == 304
    case = e.case_at(304)
    assert (case.kernel, case.batch, case.vocab, case.budget, case.origin) == ("tree_speculative_sampling", 304,
                                                                              248320, 16, "bisect")
    (none_passed,) = envelopes([_cell(509, "fault")])
    assert probe(none_passed) == 254 and none_passed.verified is None


def test_a_smaller_envelope_is_a_regression_of_the_gate():
    before = _results(_cell(508, "pass"), _cell(509, "pass"), _cell(1018, "pass"))
    after = _results(_cell(508, "pass"), _cell(509, "fault"), _cell(1018, "fault"))
    (b,), (a,) = envelopes(before.records), envelopes(after.records)
    assert shrunk(b, a) and not shrunk(a, b)
    g = gate.compare(before, after)
    assert g.failed and g.shrunk and "509" in g.shrunk[0]
    assert "Envelopes that shrank" in gate.render_markdown(g, "a", "b")


def test_the_report_has_the_envelope_table_and_picture():
    from ddtree_compat.report.markdown import render_markdown
    from ddtree_compat.report.picture import render_envelope

    res = _results(_cell(508, "pass"), _cell(509, "fault"), _cell(7, "pass", backend="sglang-triton"))
    text = render_markdown(res, envelope_picture="x-envelope.png")
    assert "## Envelope" in text and "| 508 |" in text.replace(" (all", " |") or "508" in text
    assert "fault" in text and "x-envelope.png" in text
    assert render_envelope(res)[:4] == b"\x89PNG"
    with pytest.raises(ValueError):
        render_envelope(_results())


def test_a_report_where_every_deployment_shape_cell_skipped_says_so_and_draws_no_envelope():
    """A CPU box: every cell a counted skip (device only); no table of "-" rows, no picture, one line instead."""
    from ddtree_compat.report.markdown import render_markdown
    from ddtree_compat.report.picture import render_envelope

    res = _results(*(_cell(b, "skip", message="device only: ...") for b in (508, 509, 1018)))
    text = render_markdown(res)
    assert "No deployment-shape cell ran here: all 3 skipped (3 device only: no GPU in this run;" in text
    assert "| tree_speculative_sampling |" not in text
    # a skip for another reason (a missing module) is not counted as device only
    mixed = _results(_cell(508, "skip", message="device only: ..."),
                     _cell(509, "skip", message="cannot import sglang.srt.mem_cache: No module named 'torchvision'"))
    assert "all 2 skipped (1 device only: no GPU in this run; 1 for another reason;" in render_markdown(mixed)
    # the Not-tested line counts them the same way (it had said "device only ... (1); 1 other reason(s)")
    assert ("- Deployment shapes: not tested — all 2 cells skipped (1 device only: no GPU in this run; 1 for another "
            "reason;") in render_markdown(mixed)
    # the skips the suite writes off the GPU, as their sources word them, count as device only
    from ddtree_compat.contract.backend import KernelImpl, _runtime_reason
    from ddtree_compat.families.scale.checks import DEVICE_ONLY
    from ddtree_compat.tiers import Target

    cuda = _runtime_reason(KernelImpl("k", "cuda", what="a JIT CUDA kernel"), Target("interpret", "cpu"))
    real = _results(_cell(508, "skip", message=DEVICE_ONLY), _cell(509, "skip", message=cuda))
    assert "all 2 skipped (2 device only: no GPU in this run;" in render_markdown(real)
    with pytest.raises(ValueError, match="ran"):
        render_envelope(res)


def test_a_cell_past_its_shapes_first_failure_in_this_run_need_not_run(tmp_path):
    from ddtree_compat.families.scale.records import past_envelope
    from ddtree_compat.results import FailureLog

    path = tmp_path / "r.jsonl"
    lines = [_cell(509, "fault"), _cell(300, "pass"), _cell(20, "error")]
    path.write_text("".join('{"kind": "result", ' + __import__("json").dumps(r.__dict__)[1:] + "\n" for r in lines)
                    + '{"kind": "result", "kern')  # a torn last line is left alone
    failed = FailureLog(str(path)).read()
    assert [r["outcome"] for r in failed] == ["fault", "error"]
    coords = dict(kernel=KERNEL, backend="sglang-cuda", arch="sm90", shape="v248320-b16")
    assert "batch 509" in past_envelope(failed, {**coords, "batch": 1018})
    assert past_envelope(failed, {**coords, "batch": 509}) is None
    assert past_envelope(failed, {**coords, "batch": 400}) is None
    assert past_envelope(failed, {**coords, "backend": "sglang-triton", "batch": 1018}) is None
    assert past_envelope([], {**coords, "batch": 1018}) is None


def test_the_failure_log_reads_each_line_once_as_the_file_grows(tmp_path):
    """Only what was appended since the last read is parsed; a half-written line waits for its end; torn bytes are
    passed over; a file cut shorter is read again from its start; an absent file is no failure."""
    import json

    from ddtree_compat.results import FailureLog

    path = tmp_path / "r.jsonl"
    log = FailureLog(str(path))
    assert log.read() == []
    line = lambda batch, outcome: json.dumps({"kind": "result", "batch": batch, "outcome": outcome}) + "\n"
    path.write_text(line(1, "pass") + line(2, "wrong") + '{"kind": "res')
    assert [r["batch"] for r in log.read()] == [2]
    offset = log.offset
    with open(path, "a") as f:
        f.write('ult", "batch": 3, "outcome": "fault"}\n' + "torn\n" + line(4, "skip") + line(5, "error"))
    assert [r["batch"] for r in log.read()] == [2, 3, 5] and log.offset > offset
    assert [r["batch"] for r in log.read()] == [2, 3, 5]  # nothing new: nothing parsed twice
    path.write_text(line(6, "fault"))  # started over
    assert [r["batch"] for r in log.read()] == [6]


def test_the_plugin_skips_a_cell_past_a_failure_another_process_appended(pytester):
    """Through the plugin: a failing result line for the smaller batch of a shape, already in the run's results file
    (another xdist worker's), makes the larger batch a counted skip saying why; the smaller batch itself runs its
    own check (here: device only)."""
    import json
    from pathlib import Path

    pytester.makepyfile(test_scale=(Path(__file__).parents[1] / "kernels" / "test_scale.py").read_text())
    failed = {"kind": "result", "kernel": "chain_speculative_sampling@scale", "tier": "interpret",
              "backend": "sglang-triton", "arch": "interpret", "shape": "v248320-b16", "batch": 508,
              "outcome": "fault", "case_id": "earlier", "nodeid": "elsewhere"}
    (pytester.path / "r.jsonl").write_text(json.dumps(failed) + "\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "-rs",
                                           "--ddtree-backend=sglang-triton", "--ddtree-results=r.jsonl",
                                           "-k", "chain_speculative_sampling and v248320-b16")
    text = result.stdout.str()
    assert "past the envelope: batch 508 of this shape already failed (fault)" in text and "device only" in text


@pytest.mark.parametrize("profile", ["default", "scale"])
def test_the_slices_cells_are_serial_and_start_first_the_scale_profile_keeps_its_order(pytester, profile):
    """Outside the ``scale`` profile a deployment-shape cell is marked ``serial`` (:mod:`ddtree_compat.plugin.schedule`:
    one block at the head of one worker's share); the ``scale`` profile's cells keep the collection order."""
    from pathlib import Path

    pytester.makepyfile(test_scale=(Path(__file__).parents[1] / "kernels" / "test_scale.py").read_text(),
                        test_a="def test_first():\n    pass\n", conftest=MARKS_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0", "--collect-only",
                                           "-q", "--ddtree-backend=sglang-triton", "--ddtree-results=",
                                           f"--ddtree-profile={profile}")
    marked = [ln.split(" ", 1)[1] for ln in result.outlines if ln.startswith("SERIAL ")]
    ids = [ln for ln in result.outlines if "::" in ln and not ln.startswith("SERIAL ")]
    cells = [i for i in ids if "@scale" in i]
    assert cells and "test_a.py::test_first" in ids
    if profile == "scale":
        assert ids[0] == "test_a.py::test_first" and not marked
    else:
        assert ids[:len(cells)] == cells and sorted(marked) == sorted(cells)


MARKS_PROBE = """
def pytest_collection_finish(session):
    for item in session.items:
        if item.get_closest_marker("serial") is not None:
            print("SERIAL", item.nodeid)
"""


def test_a_failure_past_everything_the_baseline_ran_is_no_shrink():
    before = envelopes([_cell(508, "pass")])[0]
    assert shrunk(before, envelopes([_cell(508, "pass"), _cell(1015, "wrong")])[0]) is None
    assert "verified to 508" in shrunk(before, envelopes([_cell(300, "pass"), _cell(500, "fault")])[0])
    nothing_ran = envelopes([_cell(508, "skip", message="does not fit")])[0]
    assert shrunk(nothing_ran, envelopes([_cell(10, "fault")])[0]) is None


def test_envelope_needs_a_gpu_and_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    from ddtree_compat import arch
    from ddtree_compat.cli import main

    monkeypatch.setattr(arch, "detect_gpus", lambda: [])
    path = tmp_path / "r.jsonl"
    path.write_text("")
    assert main(["envelope", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU visible" in err[0]
    assert path.read_text() == ""  # nothing written


def test_a_scale_case_on_a_host_reference_is_bad_input_not_a_crash(tmp_path, capsys):
    from ddtree_compat.cli import main

    case = ScaleCase("tree_speculative_sampling", 3, 64, 3)
    path = case.save(tmp_path)
    assert main(["replay", str(path), "--backend", "oracle", "--tier", "interpret"]) == 2
    assert "host reference" in capsys.readouterr().err


def test_the_resume_command_keeps_the_vocabularies():
    import argparse

    from ddtree_compat.cli import KERNEL_TESTS, _resume_command

    args = argparse.Namespace(out_dir="out", tier="auto", profile_given=True, profile="scale", tests=str(KERNEL_TESTS),
                              backend=None, vocabs=(151936,), fsync=False, sanitize=None, workers=None, timeout=None,
                              pytest_args=[])
    assert "--vocab 151936" in _resume_command(args, "stem")


def test_the_bisection_closes_a_gap_to_one_batch_with_each_probe_its_own_replay(tmp_path, monkeypatch, capsys):
    """Probes replayed by a stand-in (the kernel fails from batch 300): the envelope closes to 299 / 300, each probe a
    ``bisect`` cell in the file, a probe that hangs (batch 304) a ``fault`` of class hang, and ``--max-probes`` is
    kept."""
    import json
    import subprocess

    from ddtree_compat import arch
    from ddtree_compat.cli import main
    from ddtree_compat.results import ResultsWriter, environment, load

    path = tmp_path / "r.jsonl"
    writer = ResultsWriter(path, environment("device", "scale"))
    for r in (_cell(100, "pass"), _cell(509, "fault")):
        writer.write(r)
    monkeypatch.setattr(arch, "detect_gpus", lambda: ["a GPU"])
    calls = []

    def replay(cmd, **kwargs):
        batch = json.loads(open(cmd[4]).read())["batch"]
        calls.append(batch)
        if batch == 304:  # the first probe, the middle of 100 .. 509
            raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])
        out = "pass: ..." if batch < 300 else "fault: CUDA error: an illegal memory access was encountered"
        return subprocess.CompletedProcess(cmd, 0 if batch < 300 else 1, out, "")

    monkeypatch.setattr(subprocess, "run", replay)
    assert main(["envelope", str(path), "--max-probes", "3"]) == 1
    assert len(calls) == 3
    assert main(["envelope", str(path)]) == 1
    (e,) = envelopes(load([path]).records)
    assert (e.verified, e.first_bad) == (299, 300)
    hung = [r for r in load([path]).records if r.batch == 304]
    assert hung[0].outcome == "fault" and hung[0].fault_class == "hang" and hung[0].layout == "bisect"
    assert len(calls) == len(set(calls))  # no batch probed twice
    assert "299 / fault at 300" in capsys.readouterr().out
