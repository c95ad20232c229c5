"""Negative controls on the device: each plants one fault in the SGLang a server runs, which a correct suite must
record ``wrong``.

Put this folder first on ``PYTHONPATH`` of a pytest e2e run (the servers inherit it); ``DDTREE_PLANT`` picks the
plant (default ``mask``). Each patches one module right after its first import, before any caller binds its names:

* ``mask`` (for the poison target): rancy-ddtree-v2's ``compile_ddtree_tree`` (``sglang.srt.speculative.ddtree_utils``)
  gets a visibility tensor in which, for every request whose tree has more than two nodes, node 1 (the head of the
  argmax chain) also sees the tree's last node (an off-chain node: with the poison drafts, a poison sibling). A
  correct verify never shows a node a sibling, so the server's tokens must differ from the target-only run. Spine
  trees (budget <= 15 with an agreeing draft) have no sibling to show; run it at budget 16 or more.
* ``gdn-chain`` (for the hybrid target): the Gated DeltaNet backend of SGLang's hybrid attention
  (``sglang.srt.layers.attention.hybrid_linear_attn_backend``, ``MambaAttnBackendBase``) is told top-k 1 whatever
  the server's ``--speculative-eagle-topk``, so a tree verify runs its linear layers as one chain in node order
  (no parent table). With the hybrid target, an EAGLE tree whose accepted node follows a poison sibling in node order
  continues the sibling's recurrent state and emits ``P - 1``: the server's tokens must differ.

Each patched process appends ``planted <what> (pid N)`` to ``$DDTREE_PLANTED_LOG`` if set. Test-only: nothing in
``ddtree_compat`` imports this. Another ``sitecustomize`` further down the path still runs.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _log(line: str) -> None:
    path = os.environ.get("DDTREE_PLANTED_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{line} (pid {os.getpid()})\n")


def flip_one_bit(visibility, actual_tree_sizes):
    """A copy of ``visibility [bs, N, N]`` (bool) where node 1 of each request also sees its last node
    (``actual_tree_sizes[b] - 1``, when that is > 1 and not already visible)."""
    vis = visibility.clone()
    sizes = [int(x) for x in actual_tree_sizes.detach().cpu().tolist()]
    for b, n in enumerate(sizes[: vis.shape[0]]):
        if n > 2:
            vis[b, 1, n - 1] = True
    return vis


def _patch_mask(module) -> None:
    real = module.compile_ddtree_tree

    def compile_ddtree_tree(*args, **kwargs):
        if "visibility" in kwargs and "actual_tree_sizes" in kwargs:
            kwargs["visibility"] = flip_one_bit(kwargs["visibility"], kwargs["actual_tree_sizes"])
        elif len(args) > 7:
            args = list(args)
            args[3] = flip_one_bit(args[3], args[7])
        return real(*args, **kwargs)

    module.compile_ddtree_tree = compile_ddtree_tree
    _log("planted ddtree visibility flip")


def _patch_gdn_chain(module) -> None:
    base = module.MambaAttnBackendBase
    real = base.__init__

    def __init__(self, *args, **kwargs):
        real(self, *args, **kwargs)
        self.topk = min(self.topk, 1)

    base.__init__ = __init__
    _log("planted gdn verify as one chain")


PLANTS = {"mask": ("sglang.srt.speculative.ddtree_utils", _patch_mask),
          "gdn-chain": ("sglang.srt.layers.attention.hybrid_linear_attn_backend", _patch_gdn_chain)}
MODULE, _patch = PLANTS[os.environ.get("DDTREE_PLANT", "mask")]


class _Loader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


sys.meta_path.insert(0, _Finder())

_rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.origin and os.path.dirname(os.path.abspath(_spec.origin)) != _HERE:
    _chained = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_chained)
