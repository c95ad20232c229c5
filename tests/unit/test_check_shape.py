"""One check shape in every family: the kernel is called under the fault rule and judged outside it. What the
kernel raises is a classified ``fault``; what the suite's own code raises (laying a case out, the oracle, the
comparison) is an ``error``, never a kernel fault (``ddtree_compat.harness.calls``)."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

from ddtree_compat import records
from ddtree_compat.backends.oracle_column import OracleBackend
from ddtree_compat.contract import CaseContext
from ddtree_compat.families.verify.records import grid
from tests.unit.references import reference_column

PLANTED = "CUDA error: an illegal memory access was encountered (planted in the oracle)"
"""The planted exception reads like a kernel fault on purpose: only where it was raised may decide its outcome."""


def _first_case(record):
    if record.table == "scale":  # a deployment-shape cell's kernel at a small shape (its own cells need a GPU)
        from tests.unit.test_scale import SMALL

        return SMALL[record.name.partition("@")[0]]
    context = CaseContext("default", grid("default"), "interpret")
    return next(iter(record.cases(context)))


def _runner(record):
    """The record's run; a deployment-shape cell's without its device and memory gate."""
    run = record.runner()
    return getattr(run, "judged", run)


RECORDS = sorted(records.registry().values(), key=lambda r: r.name)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_every_record_runs_a_check_of_the_one_shape(record):
    run = record.runner()
    assert callable(getattr(run, "check", None)), f"{record.run} is not a harness.calls.check"


def _plant(monkeypatch, family: str, armed=lambda: True, fired: list | None = None) -> int:
    """Every oracle function of ``family`` (and of the families its modules import) that its records, checks and
    graphs modules use, made to raise :data:`PLANTED` whenever ``armed()`` (noted in ``fired``); how many were
    planted."""
    planted = 0
    for part in ("records", "checks", "graphs"):  # not the reference: that is the backend, the kernel under test
        name = f"ddtree_compat.families.{family}.{part}"
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        for attr, value in list(vars(module).items()):
            if inspect.isfunction(value) and _of_an_oracle(value.__module__):
                monkeypatch.setattr(module, attr, _raising(value, armed, fired))
                planted += 1
            elif inspect.ismodule(value) and _of_an_oracle(value.__name__):  # ``from . import oracle as O``
                proxy = types.SimpleNamespace(**{k: _raising(v, armed, fired) if inspect.isfunction(v) else v
                                                 for k, v in vars(value).items()})
                monkeypatch.setattr(module, attr, proxy)
                planted += 1
    return planted


def _of_an_oracle(module: str) -> bool:
    return module.startswith("ddtree_compat.families.") and module.endswith(".oracle")


def _raising(real, armed, fired):
    def raises(*args, **kwargs):
        if armed():
            if fired is not None:
                fired.append(real.__name__)
            raise RuntimeError(PLANTED)
        return real(*args, **kwargs)
    return raises


def _watched(backend, called: list) -> object:
    """``backend`` with each kernel method noting in ``called`` that it ran."""
    from ddtree_compat.contract import kernels_of

    for name in kernels_of(backend):
        method = getattr(backend, name)

        def noted(*args, method=method, **kwargs):
            called.append(True)
            return method(*args, **kwargs)
        setattr(backend, name, noted)
    return backend




@pytest.mark.parametrize("when", ["always", "after the call"])
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_an_exception_in_the_oracle_is_the_suites_error_never_a_kernel_fault(record, when, monkeypatch):
    """Planted everywhere the family's code calls its oracle (laying out, judging), or only once the kernel has run
    (the judge's own use: the commit checks take their expected values from the commit plan laid out before the
    call, so theirs calls none and must then pass)."""
    case = _first_case(record)
    family = record.run.split(".")[2]
    called, fired = [], []
    armed = (lambda: True) if when == "always" else (lambda: bool(called))
    assert _plant(monkeypatch, family, armed, fired) > 0, f"no oracle function found to plant in the {family} family"
    verdict = _runner(record)(case, _watched(reference_column(record.name), called), "cpu")
    if when == "after the call" and not fired:
        assert verdict.outcome == "pass", (verdict.outcome, verdict.message[:400])
        return
    assert fired and verdict.outcome == "error", (fired, verdict.outcome, verdict.message[:400])
    assert "the suite's own" in verdict.message and "planted in the oracle" in verdict.message, verdict.message


@pytest.mark.parametrize("family", ["verify", "attention", "ddtree"])
def test_the_judge_itself_calls_the_oracle_in_the_families_that_judge_late(family, monkeypatch):
    """The "after the call" plant above is not vacuous: in these families the judge computes expected values after
    the kernel ran, and a planted exception there is an ``error``."""
    record = next(r for r in RECORDS if r.run.split(".")[2] == family)
    called, fired = [], []
    _plant(monkeypatch, family, lambda: bool(called), fired)
    verdict = record.runner()(_first_case(record), _watched(reference_column(record.name), called), "cpu")
    assert fired and verdict.outcome == "error" and "judge" in verdict.message, (fired, verdict)


class _Raises(OracleBackend):
    def verify_tree_greedy(self, *args) -> None:
        raise RuntimeError("CUDA error: an illegal instruction was encountered")


def test_an_exception_the_kernel_raises_is_a_classified_fault():
    record = records.get("verify_tree_greedy")
    verdict = record.runner()(_first_case(record), _Raises(), "cpu")
    assert (verdict.outcome, verdict.fault_class) == ("fault", "illegal-instruction"), verdict


def test_a_check_that_judges_inside_the_call_is_refused():
    from ddtree_compat.harness.calls import check

    @check
    def judges_inline(case, backend, device):
        return ["a problem list, not a judge"]

    with pytest.raises(TypeError, match="not its judge"):
        judges_inline(None, OracleBackend(), "cpu")
