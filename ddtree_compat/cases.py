"""What every family's cases share: saving a case to a file, the seed of a case's draws, and planting
acceptance (a target that makes the greedy walk accept a chosen path).

Planted acceptance: ``target_predict`` is chosen so the oracle's accepted path is known in advance:
``none`` (root only), ``first`` (one draft), ``partial`` (a path stopping above the deepest level),
``deep`` (down to a deepest leaf), ``sibling`` (a path through a child that is not its parent's first).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

from .errors import CaseError
from .tree import DraftTree

PLANTS = ("none", "first", "partial", "deep", "sibling")


class SavedCase:
    """``save()`` for every case kind (a dataclass with ``id`` and ``to_json()``)."""

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``<directory>/<id>.json`` atomically (a temporary file, then a rename: xdist workers
        sharing one GPU may save the same failing case at once); return its path.

        Raises:
            OSError: the directory cannot be created or written.
        """
        path = Path(directory) / f"{self.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)
        return path


class FlatCase(SavedCase):
    """JSON for a case whose fields are all plain values (a frozen dataclass with ``SCHEMA``, ``KIND`` and
    ``check()``): ``{"schema": SCHEMA, <fields>}``. The sampling, DDTree and deployment-shape cases."""

    SCHEMA = ""
    KIND = ""

    def to_json(self) -> str:
        import json
        from dataclasses import asdict

        return json.dumps({"schema": self.SCHEMA, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str | None = None):
        """Parse and validate.

        Raises:
            CaseError: not JSON, another schema, unknown or missing fields, or a value ``check()`` refuses.
        """
        where = where or f"{cls.KIND} case JSON"
        data = schema_object(text, cls.SCHEMA, f"{cls.__name__}.to_json", where)
        try:
            return cls(**data).check()
        except TypeError as e:
            raise CaseError("fields", str(e), ", ".join(cls.__dataclass_fields__), "malformed", where)


# --------------------------------------------------------------------------------------------------
# Planting acceptance
# --------------------------------------------------------------------------------------------------


def schema_object(text: str, schema: str, written_by: str, where: str) -> dict:
    """The fields of a case's JSON text (``{"schema": schema, ...}`` as a case's ``to_json`` writes it), the schema
    key removed.

    Raises:
        CaseError: not JSON, not an object, or another schema (``where`` names the source).
    """
    import json

    try:
        data = json.loads(text)
    except ValueError as e:
        raise CaseError("json", text[:40], f"a JSON object written by {written_by}", f"not JSON ({e})", where)
    if not isinstance(data, dict) or data.pop("schema", None) != schema:
        raise CaseError("schema", None, schema, "wrong schema", where)
    return data


def plant_path(tree: DraftTree, plant: str, rng: np.random.Generator) -> tuple[int, ...] | None:
    """Choose the accepted path for a plant, or ``None`` when this tree cannot host it."""
    d = tree.depths
    if plant == "none":
        return (0,)
    if plant == "first":
        kids = tree.children[0]
        return (0, int(rng.choice(kids))) if kids else None
    if plant == "deep":
        if tree.max_depth < 2:
            return None
        leaves = [n for n in range(tree.num_nodes) if d[n] == tree.max_depth]
        return tree.path_to(int(rng.choice(leaves)))
    if plant == "partial":
        if tree.max_depth < 3:
            return None
        depth = int(rng.integers(2, tree.max_depth))
        return tree.path_to(int(rng.choice([n for n in range(tree.num_nodes) if d[n] == depth])))
    if plant == "sibling":
        later = [n for n in range(1, tree.num_nodes) if tree.children[tree.parents[n]][0] != n]
        if not later:
            return None
        path = list(tree.path_to(int(rng.choice(later))))
        while tree.children[path[-1]] and rng.random() < 0.7:
            path.append(int(rng.choice(tree.children[path[-1]])))
        return tuple(path)
    raise CaseError("plant", plant, ", ".join(PLANTS), "unknown")


def target_for_path(tree: DraftTree, path: tuple[int, ...], rng: np.random.Generator, vocab: int) -> tuple[int, ...]:
    """``target_predict`` that makes the greedy walk accept exactly ``path``.

    On the path: each node's target is the next node's token; at the last node a token none of its
    children hold (the bonus token). Off the path: random tokens (the walk never reads them).
    """
    target = [int(t) for t in rng.integers(vocab, size=tree.num_nodes)]
    for u, v in zip(path, path[1:]):
        target[u] = tree.tokens[v]
    taken = {tree.tokens[c] for c in tree.children[path[-1]]}
    bonus = int(rng.integers(vocab))
    while bonus in taken:
        bonus = (bonus + 1) % vocab
    target[path[-1]] = bonus
    return tuple(target)


def stable_seed(*key: object) -> int:
    """A stable 32-bit seed of ``key`` (its ``repr``): the same draw in every process and run."""
    return zlib.crc32(repr(key).encode())
