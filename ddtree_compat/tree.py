"""The draft tree as data: a parent array plus one token per node.

Node 0 is the root: the previous round's bonus token, already in the KV cache's prefix. Every other
node is a drafted token; ``parents[i] < i`` (insertion or BFS order, as DDTree and SGLang emit them).
With node budget ``B`` a tree has ``D = B + 1`` nodes (DDTree paper, Sec. 3 "tree construction";
SGLang DDTree PR #29907: verify blocks of ``B + 1`` tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .errors import CaseError


@dataclass(frozen=True)
class DraftTree:
    """A draft tree of ``D`` nodes.

    Attributes:
        parents: length ``D``; ``parents[0] == -1`` and ``0 <= parents[i] < i`` for ``i >= 1``.
        tokens: length ``D`` token ids (int, ``0 <= t < vocab``); ``tokens[0]`` is the root token.

    Raises:
        CaseError: on a malformed parent array or a length mismatch (see :meth:`check`).
    """

    parents: tuple[int, ...]
    tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "parents", tuple(int(p) for p in self.parents))
        object.__setattr__(self, "tokens", tuple(int(t) for t in self.tokens))
        self.check()

    def check(self, where: str = "tree") -> None:
        """Raise :class:`CaseError` unless the parent array describes a rooted tree in parent-first order."""
        p = self.parents
        if len(p) == 0:
            raise CaseError("parents", list(p), "a list starting with -1 (the root)", "empty", where)
        if p[0] != -1:
            raise CaseError("parents[0]", p[0], "-1 (node 0 is the root)", "root has a parent", where)
        for i in range(1, len(p)):
            if not 0 <= p[i] < i:
                raise CaseError(
                    f"parents[{i}]", p[i], f"0..{i - 1} (a parent comes before its child)", "out of range", where
                )
        if len(self.tokens) != len(p):
            raise CaseError("tokens", f"{len(self.tokens)} tokens", f"{len(p)} (one per node)", "length mismatch", where)
        if any(t < 0 for t in self.tokens):
            raise CaseError("tokens", min(self.tokens), "token ids >= 0", "negative token id", where)

    @property
    def num_nodes(self) -> int:
        """``D``: root plus drafted nodes."""
        return len(self.parents)

    @property
    def budget(self) -> int:
        """``B = D - 1``: drafted nodes, root excluded."""
        return len(self.parents) - 1

    @cached_property
    def depths(self) -> tuple[int, ...]:
        """Depth per node; the root has depth 0."""
        d = [0] * self.num_nodes
        for i in range(1, self.num_nodes):
            d[i] = d[self.parents[i]] + 1
        return tuple(d)

    @property
    def max_depth(self) -> int:
        return max(self.depths)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        """Children of each node in ascending index order (the order SGLang's walk visits them)."""
        kids: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for i in range(1, self.num_nodes):
            kids[self.parents[i]].append(i)
        return tuple(tuple(k) for k in kids)

    def path_to(self, node: int) -> tuple[int, ...]:
        """Node indices from the root down to ``node`` inclusive."""
        path = [node]
        while self.parents[path[-1]] != -1:
            path.append(self.parents[path[-1]])
        return tuple(reversed(path))


class AcceptedPath:
    """What a verify round's ``path`` (accepted node indices from the root, ``path[0] == 0``) says about its
    lengths; mixed into the families' round results, which hold ``path``."""

    path: tuple[int, ...]

    @property
    def accepted_drafts(self) -> int:
        """Draft tokens accepted (SGLang's ``accept_token_num``)."""
        return len(self.path) - 1

    @property
    def accept_length(self) -> int:
        """``accepted_drafts + 1``: tokens this round emits, the bonus token included; SGLang's ``accept len``
        (1.00 = none accepted)."""
        return len(self.path)
