"""Find a case by its id without building the whole grid (``python -m ddtree_compat replay <case id>``).

Every record's cases come from its generator (:attr:`ddtree_compat.contract.KernelRecord.cases`), most of
them from the verify grid: a commit case is the verify case at grid position ``i`` with a layout rotating
with ``i``. Building the default grid takes seconds of CPU (the full grid some minutes), so the lookup
builds only the grid *window* of the id's group instead:

* the id's ``(budget, block size, topology)`` group (``b8-spine-...``, ``-blk8``; :func:`group_of`);
* the group's place in the grid from :data:`INDEX` (``grid_index.json``: each group's case count, per
  profile; ``scripts/gen_grid_index.py`` writes it, a unit test holds it to :func:`~ddtree_compat.families.verify.records.grid`);
* a verify tuple as long as the grid, holding that group's real cases at their grid positions and an
  :class:`Elsewhere` placeholder at every other position (any attribute of it raises :class:`NotInWindow`);
* every record's generator run on that window: cases built from a placeholder are passed over, the
  rest compared by id. A generator that reads a placeholder itself runs on the whole grid instead.

A found case is the grid's own (a case id names every field a grid case is made from). An index that no
longer matches the grid (a group's count differs) makes the lookup search the whole grid, with a note.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from importlib import resources

from . import records
from .contract import CaseContext
from .families.verify.records import check_profile, grid, grid_group
from .families.verify.topologies import TOPOLOGIES

INDEX_FILE = "grid_index.json"


class NotInWindow(LookupError):
    """A generator touched a grid position outside the lookup's window."""


class Elsewhere:
    """A grid position outside the window: reading any attribute raises :class:`NotInWindow`."""

    __slots__ = ("position",)

    def __init__(self, position: int):
        object.__setattr__(self, "position", position)

    def __getattr__(self, name: str):
        raise NotInWindow(f"grid position {self.position} is outside the lookup window ({name})")

    def __repr__(self) -> str:
        return f"Elsewhere({self.position})"


@cache
def index() -> dict[str, list[tuple[int, int, str, int]]]:
    """``profile`` -> ``[(budget, block_size, topology, cases), ...]`` in grid order (``grid_index.json``)."""
    data = json.loads(resources.files(__package__).joinpath(INDEX_FILE).read_text())
    return {profile: [tuple(row) for row in rows] for profile, rows in data.items()}


def compute_index(profile: str) -> list[tuple[int, int, str, int]]:
    """The index rows of a profile, from its grid (what ``scripts/gen_grid_index.py`` writes)."""
    from .families.verify.records import grid_groups

    return [(*key, len(grid_group(profile, *key))) for key in grid_groups(profile)]


_TOPOLOGY = "|".join(sorted(map(re.escape, TOPOLOGIES), key=len, reverse=True))
_GROUP = re.compile(rf"^b(\d+)-({_TOPOLOGY})-")
_BLOCK = re.compile(r"-blk(\d+)(?=-|$)")


def group_of(case_id: str) -> tuple[int, int, str] | None:
    """``(budget, block_size, topology)`` of a verify-grid id or an id built on one (commit, verify
    attention), or ``None`` (a DDTree case, an id of no grid)."""
    m = _GROUP.match(case_id)
    if m is None:
        return None
    block = _BLOCK.search(case_id)
    return int(m.group(1)), int(block.group(1)) if block else 16, m.group(2)


def window(profile: str, case_id: str) -> tuple | None:
    """The verify tuple the generators run on for ``case_id`` (module docstring), or ``None`` when the index
    does not match the grid there."""
    rows = index().get(profile)
    if rows is None:
        return None
    total = sum(r[3] for r in rows)
    out: list = [Elsewhere(i) for i in range(total)]
    group = group_of(case_id)
    offset = 0
    for budget, block, topology, count in rows:
        if (budget, block, topology) == group:
            cases = grid_group(profile, budget, block, topology)
            if len(cases) != count:
                return None
            out[offset:offset + count] = cases
            break
        offset += count
    return tuple(out)


def _matches(cases, case_id: str):
    for c in cases:
        try:
            if c.id == case_id:
                return c
        except NotInWindow:
            continue
    return None


def _attention_profiles(profile: str) -> tuple[str, ...]:
    from .families.attention.records import PROFILES

    return PROFILES if profile == "default" else PROFILES[:1]


def find(case_id: str, profile: str = "default"):
    """The case of any registered record whose id is ``case_id`` in ``profile``'s run (verify attention: in
    every attention profile for ``default``), or ``None``.

    Raises:
        CaseError: unknown profile.
    """
    check_profile(profile)
    verify = () if profile == "scale" else window(profile, case_id)  # the scale profile has no verify grid
    if verify is None:
        print(f"ddtree_compat: note: {INDEX_FILE} does not match the {profile} grid (regenerate it with "
              "scripts/gen_grid_index.py); searching the whole grid", file=sys.stderr)
        verify = grid(profile)
    generators = list(dict.fromkeys(r.cases for r in records.registry().values()))
    for attention in _attention_profiles(profile):
        context = CaseContext(profile, verify, attention)
        for cases in generators:
            try:
                found = _matches(cases(context), case_id)
            except NotInWindow:  # this generator reads other grid positions: give it the whole grid
                found = _matches(cases(CaseContext(profile, grid(profile), attention)), case_id)
            if found is not None:
                return found
    return None


__all__ = ["find", "group_of", "window", "index", "compute_index", "Elsewhere", "NotInWindow"]
