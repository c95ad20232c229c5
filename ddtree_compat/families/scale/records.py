"""Deployment shapes: the kernels of every family at the batches where their tensors' offsets pass 2^31 and 2^32
(:mod:`.boundaries`), with plants that make every row's answer known (:mod:`.oracle`); one record per kernel,
``<kernel>@scale``, calling the kernel's own backend method (``docs/tiers.md``, "Deployment shapes").

Cells: the ``scale`` profile (``--ddtree-profile scale``) runs every derived cell of every kernel over the vocabularies
(``--ddtree-vocab``), budgets and contexts of :mod:`.boundaries`, and nothing else; every other profile runs a
bounded slice (the field's vocabulary 248320, budget 16, context 1M, the 2^31 limit's two sides). They run on
the device tier only; elsewhere each is a skip saying so, counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...cases import FlatCase
from ...contract import KernelRecord
from ...errors import CaseError
from . import boundaries as bd

SCHEMA = "ddtree-compat/scale-case/1"
SUFFIX = "@scale"
ORIGINS = ("derived", "bisect")
BAD = ("wrong", "zero-accept", "fault")
"""The kernel's failures (an ``error`` is the suite's own: it bounds no envelope)."""
TAGS = {"tree_speculative_sampling": "tree", "chain_speculative_sampling": "chain", "ddtree_sample": "ddsample",
        "verify_tree_greedy": "greedy", "assign_req_to_token": "r2t", "move_kv": "kvcopy", "ddtree_fa_full": "fafull",
        "verify_attention": "attn", "ddtree_compile": "compile", "ddtree_fa_suffix": "fasuffix", "ddtree_build": "build",
        "ddtree_prune": "prune", "ddtree_follow": "follow", "verify_attention_cascade": "cascade"}
"""A short tag per kernel, first in a case's id: ids are unique across the kernels (``replay ID`` finds the one)."""
SLICE = bd.Shape(vocab=248320, budget=16, context=1048576)
"""The default profiles' slice: the field's model family's vocabulary, budget 16, a 1M context."""


@dataclass(frozen=True)
class ScaleCase(FlatCase):
    """One kernel call at a deployment shape.

    Attributes:
        kernel: a kernel of :data:`.boundaries.KERNELS` (the backend method).
        batch: requests (``--max-running-requests`` for the pools' rows).
        vocab, budget, context: the dimensions the kernel's tensors are sized from (0 where it has none).
        boundary: which limit the batch sits at (:attr:`.boundaries.Boundary.label`), ``top`` or ``bisect``.
        origin: ``derived`` (a boundary cell) or ``bisect`` (a batch the envelope's bisection probed).
    """

    SCHEMA = SCHEMA
    KIND = "scale"

    kernel: str
    batch: int
    vocab: int = 0
    budget: int = 0
    context: int = 0
    boundary: str = ""
    origin: str = "derived"

    @property
    def shape(self) -> bd.Shape:
        return bd.Shape(self.vocab, self.budget, self.context)

    @property
    def q(self) -> int:
        return self.budget + 1

    @property
    def group(self) -> str:
        """The envelope's group: the kernel's dimensions but the batch (``v248320-b16``)."""
        parts = [f"v{self.vocab}" if self.vocab else "", f"b{self.budget}" if self.budget or self.kernel in (
            "verify_tree_greedy", "ddtree_build", "ddtree_prune", "ddtree_follow") else "", f"ctx{self.context}" if self.context else ""]
        return "-".join(p for p in parts if p)

    @property
    def id(self) -> str:
        return f"{TAGS.get(self.kernel, self.kernel)}-{self.group}-bs{self.batch}-{self.boundary or self.origin}"

    @property
    def label(self) -> str:
        return self.kernel + SUFFIX

    def nbytes(self) -> int:
        """Bytes of the tensors the kernel indexes (:func:`.boundaries.Kernel.nbytes`)."""
        return bd.KERNELS[self.kernel].nbytes(self.shape, self.batch)

    def dims(self, tensor: str) -> tuple[int, ...]:
        """The dims of one of the kernel's indexed tensors at this batch, as :mod:`.boundaries` declares them (the
        check allocates exactly these: the memory a cell needs and the boundary it sits at are of the same tensor).

        Raises:
            KeyError: the kernel indexes no tensor of that name.
        """
        found = {t.name: t for t in bd.KERNELS[self.kernel].tensors}
        return found[tensor].dims(self.shape, self.batch)

    def tensors(self) -> list[tuple[str, tuple[int, ...], int]]:
        """``(name, dims, bytes)`` of each indexed tensor."""
        return [(t.name, t.dims(self.shape, self.batch), t.nbytes(self.shape, self.batch))
                for t in bd.KERNELS[self.kernel].tensors]

    def coordinates(self) -> dict:
        return dict(budget=self.budget or None, topology="chain", plant="all-accepted", batch=self.batch,
                    block_size=None, mode="scale", layout=self.boundary or self.origin,
                    shape=self.group)

    def check(self) -> "ScaleCase":
        where = f"scale case {self.id}"
        if self.kernel not in bd.KERNELS:
            raise CaseError("kernel", self.kernel, ", ".join(bd.KERNELS), "no scale cells", where)
        for name in ("batch", "vocab", "budget", "context"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name == "batch" else 0):
                raise CaseError(name, value, "an integer >= " + ("1" if name == "batch" else "0"), "out of range", where)
        axes = bd.KERNELS[self.kernel].axes
        for name in ("vocab", "budget", "context"):
            if name in axes and getattr(self, name) < (2 if name != "budget" else 1):
                raise CaseError(name, getattr(self, name), f"set: {self.kernel}'s tensors are sized by it",
                                "missing", where)
        if self.context and self.budget and self.context <= self.q:
            raise CaseError("context", self.context, f"> q = {self.q}", "too short for a verify block", where)
        if self.origin not in ORIGINS:
            raise CaseError("origin", self.origin, ", ".join(ORIGINS), "unknown", where)
        return self

    @classmethod
    def of(cls, b: bd.Boundary, origin: str = "derived") -> "ScaleCase":
        s = b.shape
        return cls(b.kernel, b.batch, s.vocab, s.budget, s.context, b.label, origin)


def check_vocabs(vocabs) -> tuple[int, ...]:
    """``--ddtree-vocab`` values as integers (``()``: every vocabulary of :data:`.boundaries.VOCABS`).

    Raises:
        CaseError: a value that is not an integer >= 2.
    """
    out = []
    for v in vocabs or ():
        text = str(v).strip()
        if not text.isdigit() or int(text) < 2:
            raise CaseError("--ddtree-vocab", v, "integers >= 2, comma-separated (e.g. 151936,248320)",
                            "not a vocabulary size")
        out.append(int(text))
    return tuple(dict.fromkeys(out))


def scale_cases(kernel: str, profile: str, vocabs: tuple[int, ...] = ()) -> tuple[ScaleCase, ...]:
    """``kernel``'s cells: every derived boundary under the ``scale`` profile, else the slice's 2^31 pair."""
    if profile == "scale":
        return tuple(ScaleCase.of(b) for b in bd.derived(kernel, vocabs=vocabs or bd.VOCABS))
    k = bd.KERNELS[kernel]
    shape = bd.Shape(SLICE.vocab if "vocab" in k.axes else 0, SLICE.budget if "budget" in k.axes else 0,
                     SLICE.context if "context" in k.axes else 0)
    cells = [b for b in bd.boundaries(kernel, shape) if b.bits in (31, 0)]
    return tuple(ScaleCase.of(b) for b in cells[:2])


def past_envelope(failed: list[dict], coords: dict) -> str | None:
    """Why a deployment-shape cell need not run: a smaller batch of its kernel x backend x arch x shape already
    failed in this run (``failed``: the run's result lines that neither passed nor skipped, as the plugin reads
    them; the envelope's first failing batch is known, a larger batch of the same shape is past it, and each fault
    costs a fresh worker). ``None``: run it."""
    key = (coords["kernel"], coords["backend"], coords["arch"], coords["shape"])
    first = min(((r["batch"], r["outcome"]) for r in failed if r.get("outcome") in BAD
                 and (r.get("kernel"), r.get("backend"), r.get("arch"), r.get("shape")) == key), default=None)
    if first is None or first[0] >= coords["batch"]:
        return None
    return (f"past the envelope: batch {first[0]} of this shape already failed ({first[1]}) in this run; the larger "
            "batches of a shape run only up to its first failure")


def _device_kernels(backend, cases: tuple) -> tuple:
    """A scale cell measures a device kernel: a backend's host reference (Python over host tensors) gets none."""
    from ...contract import implementation

    impl = implementation(backend, cases[0].kernel) if cases else None
    return () if impl is None or impl.runtime == "host" else cases


def _record(kernel: str) -> KernelRecord:
    return KernelRecord(
        name=kernel + SUFFIX,
        summary=f"{kernel} at deployment shapes: batches at the derived 2^31 / 2^32 offset boundaries, every row judged",
        case_param="ddtree_scale_case",
        case_type=ScaleCase,
        cases=lambda ctx, k=kernel: scale_cases(k, ctx.profile, ctx.vocabs),
        run=f"ddtree_compat.families.scale.checks:{kernel}",
        for_backend=_device_kernels,
        table="scale",
        needless=past_envelope,
    )


RECORDS = tuple(_record(k) for k in bd.KERNELS)
KERNELS = tuple(r.name for r in RECORDS)
