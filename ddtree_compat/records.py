"""The registry of kernel records: every :class:`~ddtree_compat.contract.KernelRecord` of the built-in families and
of the entry point group ``ddtree_compat.kernels``, and what loops over them asks of it.

Everything that loops over kernels loops over :func:`registry`: the plugin's parametrization, ids and recording,
``replay`` (by case id and by JSON), the terminal summary, the report and the gate. A backend says which of these
kernels it implements, and where (:class:`~ddtree_compat.contract.KernelImpl`).

Built-in records live in each family's ``records.py`` (``ddtree_compat/families/<family>/``, listed in
:data:`FAMILIES`); third parties register theirs with an entry point in the group ``ddtree_compat.kernels`` whose
value is ``module:RECORDS`` (a tuple of records, or one record). To add a kernel: ``docs/extending.md``.
"""

from __future__ import annotations

import importlib
import shlex
from functools import cache
from importlib.metadata import entry_points

from .contract.record import KernelRecord, base_name
from .errors import DDTreeInputError

FAMILIES = ("verify", "commit", "attention", "ddtree", "sampling", "linear", "scale")
"""The built-in kernel families (``ddtree_compat/families/<family>/``), in registry order (their ``records.RECORDS``).
Adding a family is a new folder there and one name here."""
ENTRY_POINT_GROUP = "ddtree_compat.kernels"
BUILTIN = tuple(f"ddtree_compat.families.{family}.records" for family in FAMILIES)


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


def get(name: str) -> KernelRecord | None:
    """The record of a kernel name or label, or ``None``: the record named so (``move_kv@scale``), else the one of
    its base name (``verify_attention@emulated-sm120``)."""
    reg = registry()
    return reg.get(name) or reg.get(base_name(name))


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
