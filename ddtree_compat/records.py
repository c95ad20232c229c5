"""Kernel records: one declarative :class:`KernelRecord` per kernel under test.

A record says what the kernel is called, its case type and case generator, how a cell of it runs and
is judged (``run``: ``"module:function"``, loaded only when a cell runs, so records stay torch-free),
which results label and known-issue keys a case gets, and which report table it joins. Everything
that loops over kernels loops over :func:`registry`: the plugin's parametrization, ids and recording,
``replay`` (by case id and by JSON), the terminal summary, the report and the gate. A backend says
which of these kernels it implements, and where (:mod:`ddtree_compat.backends`).

Built-in records live in each family's ``records.py`` (:mod:`ddtree_compat.families`, listed in
:data:`~ddtree_compat.families.FAMILIES`); third parties register theirs with an entry point in the group
``ddtree_compat.kernels`` whose value is ``module:RECORDS`` (a tuple of records, or one record). To add a
kernel: ``docs/extending.md``.
"""

from __future__ import annotations

import importlib
import shlex
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Callable, Sequence

from .errors import DDTreeInputError
from .families import FAMILIES

ENTRY_POINT_GROUP = "ddtree_compat.kernels"
BUILTIN = tuple(f"ddtree_compat.families.{family}.records" for family in FAMILIES)


@dataclass(frozen=True)
class CaseContext:
    """What a record's case generator may draw on.

    Attributes:
        profile: the verify grid's profile (``default``, ``full``).
        verify: the verify cases of the run: the profile's grid, or the ``--ddtree-case`` files.
        attention_profile: the verify-attention profile (``interpret``, ``device``).
        from_files: ``verify`` came from ``--ddtree-case`` files.
    """

    profile: str
    verify: tuple
    attention_profile: str = "interpret"
    from_files: bool = False


@dataclass(frozen=True)
class KernelRecord:
    """One kernel under test.

    Attributes:
        name: the kernel's name: the results' ``kernel`` field, the backend method it calls, and what
            ``--kernel`` / ``ddtree_kernel`` select.
        summary: one line for reports and docs.
        case_param: the test argument its cases are passed in (``ddtree_case``, ``ddtree_commit_case``,
            ``ddtree_attention_case``, ...); a test asking for it is parametrized over the backends that
            implement the kernel x its cases (and x the kernels sharing the argument, when the test also
            asks for ``ddtree_kernel``).
        case_type: the case class (with ``SCHEMA``, ``from_json``, ``id``, ``coordinates()``, ``save()``).
        cases: ``(CaseContext) -> cases``: the cases of a run, in a stable order.
        run: ``"module:function"`` of ``(case, backend, target) -> Verdict``: lay the case out, call the
            backend once, judge exactly against the oracle (never raises for a kernel failure; the family's
            ``checks.py``, on :func:`ddtree_compat.harness.calls.check`).
        label: ``(case) -> str``: the results' kernel label of a case when it is not ``name``
            (``verify_attention@emulated-sm120``).
        known_issues: the known-issues manifest keys this kernel's cells (by arch, backend, kernel, budget,
            topology, layout, batch; :mod:`ddtree_compat.known_issues`).
        for_backend: ``(backend, cases) -> cases``: the cases a backend runs (default: all).
        emulates: ``(case) -> arch | None``: the arch whose code path a case runs on any target (its
            cell gets that arch's markers too: ``pytest -m sm120`` selects it), or ``None``.
        table: the report table its cells join: ``matrix`` (budget x topology) or ``attention``.
    """

    name: str
    summary: str
    case_param: str
    case_type: type
    cases: Callable[[CaseContext], Sequence[Any]]
    run: str
    label: Callable[[Any], str] | None = None
    known_issues: bool = False
    for_backend: Callable[[Any, tuple], tuple] | None = None
    emulates: Callable[[Any], "str | None"] | None = None
    table: str = "matrix"

    def label_of(self, case) -> str:
        """The results' kernel label of ``case``."""
        return self.label(case) if self.label else self.name

    def runner(self) -> Callable:
        """The ``run`` function (imports its module: the torch side)."""
        module, _, attr = self.run.partition(":")
        return getattr(importlib.import_module(module), attr)

    def backend_cases(self, backend, cases: tuple) -> tuple:
        return self.for_backend(backend, cases) if self.for_backend else cases


def _records_of(obj, where: str) -> list[KernelRecord]:
    items = obj if isinstance(obj, (tuple, list)) else (obj,)
    bad = [i for i in items if not isinstance(i, KernelRecord)]
    if bad:
        raise DDTreeInputError("kernel record", where, "a KernelRecord or a tuple of them", "not a record")
    return list(items)


@cache
def registry() -> dict[str, KernelRecord]:
    """Every kernel record, by name: the built-ins, then entry points (a built-in name is not overridden).

    Raises:
        DDTreeInputError: an entry point that does not load to records.
    """
    out: dict[str, KernelRecord] = {}
    for module in BUILTIN:
        for record in importlib.import_module(module).RECORDS:
            out[record.name] = record
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
        except (ImportError, AttributeError) as e:
            raise DDTreeInputError("entry point", f"{ENTRY_POINT_GROUP}: {ep.name} = {ep.value}", "an importable "
                                   "module:RECORDS", f"cannot load ({type(e).__name__}: {e})") from None
        for record in _records_of(loaded, ep.value):
            out.setdefault(record.name, record)
    return out


def base_name(label: str) -> str:
    """``verify_attention@emulated-sm120`` -> ``verify_attention`` (labels add ``@<variant>``)."""
    return label.partition("@")[0]


def get(name: str) -> KernelRecord | None:
    """The record of a kernel name or label, or ``None``."""
    return registry().get(base_name(name))


def replayed_by(label: str) -> KernelRecord | None:
    """The record whose ``run`` reproduces a cell of this results label: the record named ``label``, or the
    one whose ``label`` function gives ``name@variant`` labels (``verify_attention@emulated-sm120``).

    ``None`` for a test's own round over a record's kernels, such as ``verify_tree_greedy@graph`` (the verify
    launch captured in a CUDA graph at capacity, replayed at the live width: the record's plain ``run``
    would not capture it) or ``ddtree_sample_chain@graph``: only that cell's pytest node replays it.
    """
    record = get(label)
    if record is None or (label != record.name and record.label is None):
        return None
    return record


def replay_cli(case_path: str, backend: str, label: str, tier: str | None = None) -> str | None:
    """``python -m ddtree_compat replay CASE --backend B [--kernel LABEL] [--tier T]``, the in-process replay of a
    cell; ``--kernel`` only where the case's type feeds several records (a commit case), ``--tier`` when given.
    ``None`` where no record replays the label (:func:`replayed_by`): replay the pytest cell instead."""
    record = replayed_by(label)
    if record is None:
        return None
    alone = [r for r in registry().values() if r.case_type is record.case_type] == [record]
    return (f"python -m ddtree_compat replay {shlex.quote(str(case_path))} --backend {shlex.quote(backend)}"
            + ("" if alone else f" --kernel {label}") + (f" --tier {tier}" if tier else ""))


def for_param(param: str) -> list[KernelRecord]:
    """The records whose cases a test argument named ``param`` receives, in registry order."""
    return [r for r in registry().values() if r.case_param == param]


def case_params() -> set[str]:
    return {r.case_param for r in registry().values()}


def for_case(case) -> list[KernelRecord]:
    """The records whose case type is ``case``'s."""
    return [r for r in registry().values() if isinstance(case, r.case_type)]


def case_from_json(text: str, where: str):
    """Parse a case JSON of any registered kind (by its ``schema``).

    Raises:
        DDTreeInputError: not JSON, or no registered case type has its schema.
    """
    import json

    try:
        schema = json.loads(text).get("schema")
    except (ValueError, AttributeError, UnicodeDecodeError):
        schema = None
    types = {r.case_type.SCHEMA: r.case_type for r in registry().values()}
    if schema not in types:
        raise DDTreeInputError("schema", schema, ", ".join(types), "not a case file of a registered kernel", where)
    return types[schema].from_json(text, where)
