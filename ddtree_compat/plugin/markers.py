"""Markers, generated from the tier names and the arch table (:data:`ddtree_compat.arch.ARCHES`): one
per tier, per arch (exact: ``sm120`` never selects an sm121 host) and per family (``blackwell_rtx``),
registered in every session so ``--strict-markers`` knows them; nothing else is changed."""

from __future__ import annotations

import re

import pytest

from ..arch import ARCHES, FAMILIES, family
from ..errors import DDTreeInputError
from ..tiers import E2E, STATIC, TIERS, Target

EMULATED = "emulated"
LONG = "long"
"""A test that takes seconds on its own: :mod:`.schedule` starts it first."""
SERIAL = "serial"
"""A test that holds tens of GiB of GPU memory (the slice's deployment-shape cells): :mod:`.schedule` runs them one
after another on one worker, started first."""
TIER_HELP = {
    "interpret": "DDTree interpret tier (Triton under TRITON_INTERPRET=1 on the CPU)",
    "device": "DDTree device tier (each visible GPU)",
    STATIC: "DDTree static tier (each kernel compiled ahead of time for each arch on the CPU; resources and SASS checked)",
    E2E: "DDTree end-to-end tier (a real SGLang server per speculative configuration; needs a GPU)",
}


def marker_name(name: str) -> str:
    """A family or arch as a marker (``blackwell-rtx`` -> ``blackwell_rtx``)."""
    return name.replace("-", "_")


def names() -> set[str]:
    """Every marker this plugin registers for tiers, archs and families (detected archs aside)."""
    return {*TIERS, STATIC, E2E, EMULATED, *ARCHES, *(marker_name(f) for f in FAMILIES)}


def register(config: pytest.Config, extra_archs: tuple[tuple[str, str], ...] = ()) -> None:
    """Register the markers (``extra_archs``: :func:`register_archs`)."""
    for tier in (*TIERS, STATIC, E2E):
        config.addinivalue_line("markers", f"{tier}: {TIER_HELP[tier]}")
    for arch, row in ARCHES.items():
        config.addinivalue_line("markers", f"{arch}: compute capability {arch} ({row.products})")
    for fam in FAMILIES:
        config.addinivalue_line("markers", f"{marker_name(fam)}: {fam} family")
    config.addinivalue_line("markers", f"{EMULATED}: runs another arch's tile choice on this target "
                                       "(verify attention, kernel verify_attention@emulated-<arch>)")
    config.addinivalue_line("markers", f"{LONG}: takes seconds on its own (a compile, a property test); started first, "
                                       "one at the head of each xdist worker's share")
    config.addinivalue_line("markers", f"{SERIAL}: holds tens of GiB of GPU memory (a deployment-shape cell outside "
                                       "the scale profile); these run one after another on one xdist worker, first")
    config.addinivalue_line("markers", "ddtree_needs(kernel, ...): a test taking only ddtree_target and ddtree_backend "
                                       "runs on the backends implementing these kernels")
    register_archs(config, extra_archs)


def register_archs(config: pytest.Config, archs: tuple[tuple[str, str], ...]) -> None:
    """Register ``(arch, description)`` markers of detected GPUs the arch table lacks."""
    for arch, text in archs:
        config.addinivalue_line("markers", f"{arch}: {text}")


def selected(markexpr: str) -> set[str]:
    """The markers of :func:`names` (and any ``sm<NN>``) a ``-m`` expression names."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", markexpr or ""))
    return {w for w in words if w in names() or re.fullmatch(r"sm\d+", w)}


ARCH_WORD = re.compile(r"sm\d+\w*")
"""A word of a ``-m`` expression that names an arch (``sm120``, ``sm90a``)."""


def check_markexpr(markexpr: str, detected: list[str] | tuple = (), registered: list[str] | tuple = ()) -> None:
    """Reject a ``-m`` expression naming an arch marker no arch row has (``-m sm999``, a typo of ``sm90``),
    before any worker starts. ``detected``: the archs of this host's GPUs (registered too); ``registered``:
    marker names the session registers itself (a project's own ``sm...`` markers are left alone).

    Raises:
        DDTreeInputError: the first unknown arch marker, with the known ones.
    """
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", markexpr or "")
    known = {*names(), *detected, *registered}
    unknown = [w for w in words if ARCH_WORD.fullmatch(w) and w not in known]
    if unknown:
        families = ", ".join(marker_name(f) for f in FAMILIES)
        raise DDTreeInputError("-m", markexpr, f"the arch markers {', '.join(ARCHES)} (families: {families})",
                               f"unknown arch marker {unknown[0]!r}")


def check_expression(option: str, expression: str) -> None:
    """Reject a ``-m`` or ``-k`` expression that pytest cannot parse, naming the option. (Plain pytest says so in its
    usage line; under xdist it finds it in each worker, where it becomes an internal error that never names it.)

    Raises:
        DDTreeInputError: ``expression`` does not parse (where and why, as pytest's parser says).
    """
    if not (expression or "").strip():
        return
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pytest moved its parser: pytest itself still refuses a bad expression
        return
    try:
        Expression.compile(expression)
    except Exception as e:  # noqa: BLE001 - ParseError (pytest < 9) or SyntaxError (pytest 9)
        column = getattr(e, "offset", None) or getattr(e, "column", None)
        why = getattr(e, "msg", None) or getattr(e, "message", None) or str(e)
        raise DDTreeInputError(option, expression, "names joined by and, or, not and parentheses (pytest's "
                               f"{option} syntax)", f"does not parse{f' at column {column}' if column else ''}: "
                               f"{why}") from None


def registered_names(config: pytest.Config) -> list[str]:
    """The marker names registered in ``config`` so far (ini ``markers`` lines)."""
    return [line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")]


def arch_marks(arch: str) -> list:
    """The exact arch marker and its family marker (``sm120`` -> ``sm120``, ``blackwell_rtx``)."""
    return [getattr(pytest.mark, arch), getattr(pytest.mark, marker_name(family(arch)))]


def target_marks(target: Target) -> list:
    return [getattr(pytest.mark, target.tier), *(arch_marks(target.arch) if target.arch else [])]
