"""Greedy tree verify: SGLang's ``verify_tree_greedy`` contract over EAGLE-format buffers.

Backend method ``verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
retrive_next_token, retrive_next_sibling, target_predict)``, outputs written in place. Shapes and dtypes
(``bs`` requests, ``C`` node slots each, ``S = accept_width``): ``predicts`` int32 ``[bs*C]``;
``accept_index`` int32 ``[bs, S]``; ``accept_token_num`` int32 ``[bs]``; the five inputs int64
``[bs, C]``, on the target's device. Contract: :func:`.oracle.verify_greedy_eagle`
(elements off the accepted path are left as they were). Cases: the verify grid
(:func:`grid`) or ``--ddtree-case`` files; judged by :func:`.checks.run_verify`.

The case type, :class:`VerifyCase`, holds explicit arrays (parents, tokens, target_predict per request), so
a case written to JSON replays bit-for-bit with ``python -m ddtree_compat replay CASE.json``. Grid cases are
generated deterministically from their parameters (xdist workers collect identical grids). The commit and
verify-attention cases are made of a verify case plus fields of their own (:class:`NestedCase`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...cases import PLANTS, SavedCase, plant_path, schema_object, stable_seed, target_for_path
from ...errors import CaseError
from ...contract import CaseContext, KernelRecord
from ...tree import DraftTree
from .oracle import VerifyResult, verify_greedy
from .topologies import TOPOLOGIES, supports_budget

PROFILES = ("default", "full", "scale")
DEFAULT_VOCAB = 1024
SCHEMA = "ddtree-compat/verify-case/1"


@dataclass(frozen=True)
class Request:
    """One request of a batch: its draft tree and the target's argmax token per node (length ``D``)."""

    parents: tuple[int, ...]
    tokens: tuple[int, ...]
    target_predict: tuple[int, ...]

    @property
    def tree(self) -> DraftTree:
        return DraftTree(self.parents, self.tokens)


@dataclass(frozen=True)
class VerifyCase(SavedCase):
    """One ``verify_tree_greedy`` call: a batch of requests sharing budget ``B`` (``D = B + 1`` nodes each).

    Attributes:
        budget: node budget ``B >= 0`` (drafted nodes, root excluded).
        block_size: DFlash block size; depth limit ``L = block_size - 1``; spine mode iff ``B <= L``.
        topology: a name from :data:`ddtree_compat.families.verify.topologies.TOPOLOGIES` or ``"custom"``.
        plant: planted acceptance, one of :data:`PLANTS` or ``"custom"``.
        seed: the generator seed (informational for custom cases).
        vocab: token ids are in ``[0, vocab)``.
        requests: ``bs >= 1`` requests.
        capacity: node slots per request in the kernel buffers (``C >= D``; ``None`` = ``D``). Slots
            ``D..C-1`` are padding (-1), as with buffers sized for a CUDA graph of capacity ``C``.
        accept_width: columns of ``accept_index`` (SGLang: ``spec_steps + 1``); ``None`` =
            ``min(D, block_size)``, enough for the deepest path a DDTree of this budget can have.
        topk_cap: the per-depth top-k cap the tree was built with (``None``: paper's ``min(B, V)``).
        origin: ``grid``, ``hypothesis`` or ``file``.

    Raises:
        CaseError: via :meth:`check`, naming the first bad field.
    """

    SCHEMA = SCHEMA

    budget: int
    block_size: int
    topology: str
    plant: str
    seed: int
    vocab: int
    requests: tuple[Request, ...]
    capacity: int | None = None
    accept_width: int | None = None
    topk_cap: int | None = None
    origin: str = "grid"

    # ---------------------------------------------------------------- derived
    @property
    def num_nodes(self) -> int:
        return self.budget + 1

    @property
    def batch(self) -> int:
        return len(self.requests)

    @property
    def slots(self) -> int:
        """``C``: node slots per request in the buffers."""
        return self.capacity if self.capacity is not None else self.num_nodes

    @property
    def width(self) -> int:
        """Columns of ``accept_index``."""
        return self.accept_width if self.accept_width is not None else min(self.num_nodes, self.block_size)

    @property
    def mode(self) -> str:
        """SGLang DDTree mode for this budget: ``spine`` (``B <= block_size - 1``) or ``tree``."""
        return "spine" if self.budget <= self.block_size - 1 else "tree"

    @property
    def layout(self) -> str:
        """``exact`` when buffers hold ``D`` slots per request, else ``cap<C>`` (padded)."""
        return "exact" if self.slots == self.num_nodes else f"cap{self.slots}"

    @property
    def id(self) -> str:
        """Readable id, e.g. ``b8-spine-deep-bs3`` (block size, capacity and origin added when not default)."""
        parts = [f"b{self.budget}", self.topology, self.plant, f"bs{self.batch}"]
        if self.block_size != 16:
            parts.append(f"blk{self.block_size}")
        if self.layout != "exact":
            parts.append(self.layout)
        if self.origin != "grid":
            parts.append(f"{self.origin}{self.seed}")
        return "-".join(parts)

    def coordinates(self) -> dict:
        """The fields a result line records for a cell of this case (see :class:`ddtree_compat.results.ResultRecord`)."""
        return dict(budget=self.budget, topology=self.topology, plant=self.plant, batch=self.batch,
                    block_size=self.block_size, mode=self.mode, layout=self.layout, shape="")

    def expected(self) -> tuple[VerifyResult, ...]:
        """The oracle's verify result per request."""
        return tuple(verify_greedy(r.tree, r.target_predict, self.width - 1) for r in self.requests)

    # ---------------------------------------------------------------- validation
    def check(self, where: str = "case") -> "VerifyCase":
        """Validate every field; return ``self``. Raises :class:`CaseError` on the first bad one."""
        for name in ("budget", "block_size", "seed", "vocab", "capacity", "accept_width", "topk_cap"):
            value = getattr(self, name)
            if not _is_int(value) and not (value is None and name in ("capacity", "accept_width", "topk_cap")):
                raise CaseError(name, value, "an integer" + ("" if name in ("budget", "block_size", "seed", "vocab")
                                                             else " or null"), "wrong type", where)
        where = f"{where} {self.id}" if self.requests else where
        if self.budget < 0:
            raise CaseError("budget", self.budget, "integer >= 0", "out of range", where)
        if not isinstance(self.block_size, int) or self.block_size < 2:
            raise CaseError("block_size", self.block_size, "integer >= 2", "out of range", where)
        if self.topology not in (*TOPOLOGIES, "custom"):
            raise CaseError("topology", self.topology, ", ".join((*TOPOLOGIES, "custom")), "unknown", where)
        if self.plant not in (*PLANTS, "custom"):
            raise CaseError("plant", self.plant, ", ".join((*PLANTS, "custom")), "unknown", where)
        if not isinstance(self.vocab, int) or self.vocab < 2:
            raise CaseError("vocab", self.vocab, "integer >= 2", "out of range", where)
        if self.topk_cap is not None and (not isinstance(self.topk_cap, int) or self.topk_cap < 1):
            raise CaseError("topk_cap", self.topk_cap, "null or integer >= 1", "out of range", where)
        if not self.requests:
            raise CaseError("requests", [], "a list of >= 1 request", "empty batch", where)
        if self.capacity is not None and (not isinstance(self.capacity, int) or self.capacity < self.num_nodes):
            raise CaseError("capacity", self.capacity, f"null or integer >= D = {self.num_nodes}", "too small", where)
        if self.accept_width is not None and (not isinstance(self.accept_width, int) or self.accept_width < 1):
            raise CaseError("accept_width", self.accept_width, "null or integer >= 1", "out of range", where)
        for b, r in enumerate(self.requests):
            at = f"{where} request {b}"
            if len(r.parents) != self.num_nodes:
                raise CaseError("parents", f"{len(r.parents)} nodes", f"D = budget + 1 = {self.num_nodes}", "length", at)
            tree = r.tree  # checks parent order and token count
            if tree.max_depth > self.block_size - 1:
                raise CaseError("parents", f"depth {tree.max_depth}", f"depth <= block_size - 1 = {self.block_size - 1}",
                                "too deep", at)
            if len(r.target_predict) != self.num_nodes:
                raise CaseError("target_predict", f"{len(r.target_predict)} tokens", f"{self.num_nodes}", "length", at)
            bad = [t for t in (*r.tokens, *r.target_predict) if not 0 <= t < self.vocab]
            if bad:
                raise CaseError("tokens", bad[0], f"0..{self.vocab - 1} (vocab {self.vocab})", "out of range", at)
        return self

    # ---------------------------------------------------------------- JSON
    def to_json(self) -> str:
        data = {"schema": SCHEMA, **asdict(self)}
        data["requests"] = [asdict(r) for r in self.requests]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str = "case JSON") -> "VerifyCase":
        """Parse and validate. Raises :class:`CaseError` on bad JSON, unknown keys or bad values."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise CaseError("json", text[:40], "a JSON object written by VerifyCase.to_json", f"not JSON ({e.msg})", where)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise CaseError("schema", data.get("schema") if isinstance(data, dict) else type(data).__name__,
                            SCHEMA, "wrong schema", where)
        names = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - names - {"schema"}
        if unknown:
            raise CaseError(sorted(unknown)[0], data[sorted(unknown)[0]], ", ".join(sorted(names)), "unknown field", where)
        missing = {"budget", "block_size", "topology", "plant", "seed", "vocab", "requests"} - set(data)
        if missing:
            raise CaseError(sorted(missing)[0], None, "present", "missing", where)
        requests = data["requests"]
        if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
            raise CaseError("requests", type(requests).__name__, "a list of objects with parents, tokens, "
                            "target_predict", "malformed", where)
        for b, r in enumerate(requests):
            for name in ("parents", "tokens", "target_predict"):
                values = r.get(name)
                if not isinstance(values, list) or not all(_is_int(v) for v in values):
                    bad = values if not isinstance(values, list) else next(v for v in values if not _is_int(v))
                    raise CaseError(name, bad, "a list of integers", "wrong type", f"{where} request {b}")
        reqs = tuple(Request(tuple(r["parents"]), tuple(r["tokens"]), tuple(r["target_predict"])) for r in requests)
        fields = {k: v for k, v in data.items() if k not in ("schema", "requests")}
        return cls(requests=reqs, **fields).check(where)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "VerifyCase":
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise CaseError("path", str(path), "a readable case JSON file", e.strerror or "unreadable")
        return cls.from_json(text, where=str(path))


def _is_int(value) -> bool:
    """An integer of the JSON (``True`` is no integer here)."""
    return isinstance(value, int) and not isinstance(value, bool)


class NestedCase(SavedCase):
    """JSON and files for a case made of a :class:`VerifyCase` (field ``verify``) plus fields of its own:
    the commit and verify-attention cases. A subclass (a dataclass) sets ``SCHEMA`` and ``KIND``.

    The JSON is ``{"schema": SCHEMA, <own fields>, "verify": <VerifyCase JSON>}``; :meth:`from_json`
    raises :class:`CaseError` on bad JSON, a wrong schema or malformed fields, and validates through
    the subclass's ``check()``.
    """

    SCHEMA = ""
    KIND = ""

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k != "verify"}
        return json.dumps({"schema": self.SCHEMA, **data, "verify": json.loads(self.verify.to_json())},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str | None = None):
        where = where or f"{cls.KIND} case JSON"
        data = schema_object(text, cls.SCHEMA, f"{cls.__name__}.to_json", where)
        try:
            verify = VerifyCase.from_json(json.dumps(data.pop("verify")), where)
            return cls(verify=verify, **data).check()
        except (TypeError, KeyError) as e:
            raise CaseError("fields", str(e), ", ".join(cls.__dataclass_fields__), "malformed", where)


def make_case(budget: int, topology: str, plant: str, batch: int, block_size: int = 16,
              vocab: int = DEFAULT_VOCAB, topk_cap: int | None = None, capacity: int | None = None,
              attempts: int = 64) -> VerifyCase | None:
    """Generate one grid case, or ``None`` when the topology cannot host the plant at this budget.

    Each request draws its own tree (seeded from the case parameters and the request index); a draw
    that cannot host the plant is redrawn up to ``attempts`` times.
    """
    if not supports_budget(topology, budget, block_size, vocab, topk_cap):
        return None
    if budget == 0 and plant != "none":
        return None
    draw = stable_seed(budget, topology, plant, batch, block_size, vocab, topk_cap)
    rng = np.random.default_rng(draw)
    fn = TOPOLOGIES[topology]
    requests = []
    for _ in range(batch):
        for _attempt in range(attempts):
            tree = fn(budget, block_size, rng, vocab, topk_cap)
            path = plant_path(tree, plant, rng) if tree.budget == budget else None
            if path is not None:
                break
        else:
            return None
        requests.append(Request(tree.parents, tree.tokens, target_for_path(tree, path, rng, vocab)))
    case = VerifyCase(budget, block_size, topology, plant, draw, vocab, tuple(requests), capacity=capacity,
                      topk_cap=topk_cap)
    return case.check()


@dataclass(frozen=True)
class GridSpec:
    """Axes of a sweep profile."""

    budgets: tuple[int, ...]
    block_sizes: tuple[int, ...]
    batches: tuple[int, ...]
    topologies: tuple[str, ...] = tuple(TOPOLOGIES)
    plants: tuple[str, ...] = PLANTS
    # batch sizes that also get a padded layout: buffers of capacity C = max(block_size, D) > D,
    # accept_index of width block_size (the CUDA-graph sizing behind the field failure, B = 8 / 12).
    padded_batches: tuple[int, ...] = (3,)


PROFILE_GRIDS: dict[str, GridSpec] = {
    "default": GridSpec(budgets=(0, 1, 2, 3, 7, 8, 12, 14, 15, 16, 17, 31, 32, 33, 63, 64),
                        block_sizes=(16,), batches=(1, 3, 8)),
    "full": GridSpec(budgets=(0, 1, 2, 3, 7, 8, 12, 14, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256),
                     block_sizes=(8, 16, 32), batches=(1, 3, 8, 64), padded_batches=(3, 64)),
    # the deployment-shape cells only (ddtree_compat/families/scale/): no grid case
    "scale": GridSpec(budgets=(), block_sizes=(16,), batches=()),
}


def check_profile(profile: str) -> str:
    if profile not in PROFILE_GRIDS:
        raise CaseError("profile", profile, ", ".join(PROFILE_GRIDS), "unknown profile")
    return profile


GroupKey = tuple[int, int, str]
"""``(budget, block_size, topology)``: one group of the grid (:func:`grid_group`)."""


def grid_groups(profile: str = "default") -> tuple[GroupKey, ...]:
    """The groups of a profile's grid, in grid order (budget, then block size, then topology).

    Raises:
        CaseError: unknown profile.
    """
    spec = PROFILE_GRIDS[check_profile(profile)]
    return tuple((b, blk, t) for b in spec.budgets for blk in spec.block_sizes for t in spec.topologies)


def grid_group(profile: str, budget: int, block_size: int, topology: str) -> tuple[VerifyCase, ...]:
    """The valid verify cases of one group of a profile's grid, in grid order (plant, batch; a batch of
    ``padded_batches`` also padded to capacity ``block_size`` when ``D < block_size``)."""
    spec = PROFILE_GRIDS[check_profile(profile)]
    cases = []
    for plant in spec.plants:
        for batch in spec.batches:
            case = make_case(budget, topology, plant, batch, block_size)
            if case is None:
                continue
            cases.append(case)
            if batch in spec.padded_batches and case.num_nodes < block_size:
                cases.append(replace(case, capacity=block_size, accept_width=block_size))
    return tuple(cases)


@lru_cache(maxsize=4)
def grid(profile: str = "default") -> tuple[VerifyCase, ...]:
    """All valid verify cases of a profile, in a stable order: its groups (:func:`grid_groups`) one after
    another; from the cache on disk when this code built it before (:mod:`.grid_cache`).

    Raises:
        CaseError: unknown profile.
    """
    from .grid_cache import cached

    check_profile(profile)
    return cached(profile, lambda: tuple(c for key in grid_groups(profile) for c in grid_group(profile, *key)))


WARM_PROCESSES = 4
"""Processes :func:`warm_grid` builds the groups in, on a host of 16 cores or more (a quarter of the cores
below that; in the thread itself under 8 cores, where the workers' start-up has no core to spare)."""


def warm_grid(profile: str):
    """Build ``profile``'s grid into the cache on disk in a daemon thread of this process; returns the thread
    (``None`` with the cache off). The sweep's command starts it before pytest and waits for pytest meanwhile:
    the workers reach collection seconds later and wait on the cache's lock for this one build instead of each
    building its own. The thread holds the lock while up to :data:`WARM_PROCESSES` fresh processes build the
    groups (one build took 9-17 s of a loaded H200 host, longer than the workers' start-up); a fresh process
    runs the code as loaded from the files, as does the command that calls this (nothing patched at run time).
    An error here is left to the workers, which build the grid again and report it."""
    import threading

    from .grid_cache import cached, enabled

    if not enabled():
        return None

    processes = min(WARM_PROCESSES, (os.cpu_count() or 1) // 4)

    def build() -> None:
        try:
            if processes >= 2:
                cached(profile, lambda: _built_in_processes(profile, processes))
            else:
                grid(profile)
        except Exception:  # noqa: BLE001 - see above
            pass

    thread = threading.Thread(target=build, name=f"ddtree-grid-{profile}", daemon=True)
    thread.start()
    return thread


def _built_in_processes(profile: str, processes: int) -> tuple[VerifyCase, ...]:
    """:func:`grid`'s cases (equal case by case), its groups built by ``processes`` fresh (spawned) processes,
    in grid order."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    keys = grid_groups(profile)
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        groups = pool.map(grid_group, *zip(*[(profile, *key) for key in keys]))
        return tuple(case for group in groups for case in group)


# --------------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------------

VERIFY = "verify_tree_greedy"
GRAPH = f"{VERIFY}@graph"
"""The verify launch captured in a CUDA graph at capacity and replayed at the live width (:mod:`.graphs`)."""


def _cases(ctx: CaseContext) -> tuple:
    return tuple(ctx.verify)


RECORD = KernelRecord(
    name=VERIFY,
    summary="greedy tree verify over EAGLE retrieve links: predicts, accept_index, accept_token_num",
    case_param="ddtree_case",
    case_type=VerifyCase,
    cases=_cases,
    run="ddtree_compat.families.verify.checks:run_verify",
    known_issues=True,
)
RECORDS = (RECORD,)
