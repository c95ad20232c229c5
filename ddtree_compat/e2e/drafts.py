"""Writing a draft checkpoint of any algorithm: the EAGLE and STANDALONE drafts of
:mod:`.checkpoints`, the DFlash draft of :mod:`.dflash`."""

from __future__ import annotations

from pathlib import Path

from . import checkpoints as ck
from .dflash import draft_tensors


def write_draft(root: str | Path, spec: ck.DraftSpec, shape: ck.TinyShape = ck.TinyShape()) -> Path:
    """Write one draft under ``root/<spec.name>``.

    Raises:
        ValueError: unknown algorithm.
    """
    path = Path(root) / spec.name
    if spec.algorithm == ck.EAGLE:
        return ck.write_checkpoint(path, ck.eagle_config(shape), ck.eagle_tensors(shape, spec.agree))
    if spec.algorithm == ck.STANDALONE:
        return ck.write_checkpoint(path, ck.standalone_config(shape), ck.standalone_tensors(shape, spec.agree))
    if spec.algorithm == ck.DFLASH:
        ids = ck.dflash_layer_ids(shape)
        mask = shape.vocab - 1
        return ck.write_checkpoint(path, ck.dflash_config(shape, spec.block_size, ids, mask),
                                   draft_tensors(shape, spec.agree, mask, ids))
    raise ValueError(f"draft algorithm {spec.algorithm!r}: expected {ck.EAGLE}, {ck.STANDALONE} or {ck.DFLASH}")
