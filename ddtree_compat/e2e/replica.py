"""The ``replica`` e2e profile: one user's serving configuration mirrored on the tiny checkpoints (what preflight's
``e2e`` line serves, :mod:`ddtree_compat.preflight`).

A :class:`Replica` is written as JSON by preflight and named by ``DDTREE_E2E_REPLICA``; :func:`.configs.plan` of the
``replica`` profile turns it into server configurations of the usual kinds (:func:`.configs.replica_servers`: an
always-agreeing draft, so accept lengths are exact and every token is judged against the target-only server), at the
configuration's speculative
flags, attention backend, CUDA graphs, concurrency (its ``--max-running-requests``) and sampling, on a target of the
model's vocabulary (the tiny code padded to it) and layer types (the hybrid class for a Qwen3.5 / Qwen3-Next model).

What the tiny target cannot be is said, never silently dropped (:attr:`Replica.not_mirrored`): the model's head
geometry and depth (the target's are the tiny code's; the model's heads are preflight's geometry cells), the draft
checkpoint (the suite's agreeing draft serves instead), tensor parallelism (one GPU), flags of several values.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

ENV = "DDTREE_E2E_REPLICA"
"""The replica's JSON file (written by preflight)."""
PROFILE = "replica"

MAX_CONCURRENCY = 512
"""The largest phase a replica serves (the ``scale`` profile's, seen serving at the field's vocabulary)."""
ALGORITHMS = ("EAGLE", "STANDALONE", "DFLASH", "DDTREE")
"""Algorithms the tiny drafts exist for."""
STRUCTURED = {
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-ddtree-budget",
    "--speculative-ddtree-block-size", "--speculative-dflash-block-size", "--speculative-dflash-enable-ddtree",
    "--speculative-draft-model-revision", "--speculative-draft-load-format",
}
"""Speculative flags the replica expresses itself (its own draft, the budget and block size as read)."""
PASSED = ("--is-ddtree-prune", "--page-size", "--kv-cache-dtype", "--mamba-ssm-dtype", "--linear-attn-backend",
          "--linear-attn-verify-backend", "--sampling-backend")
"""Flags besides ``--speculative-*`` that shape the verify and are passed to the replica as given."""


@dataclass(frozen=True)
class Replica:
    """One configuration to serve on the tiny checkpoints.

    Attributes:
        algorithm: ``DDTREE``, ``DFLASH``, ``EAGLE`` or ``STANDALONE``.
        budget, block_size: DDTREE's ``B`` and block (DFLASH: the block).
        steps, topk, draft_tokens: EAGLE / STANDALONE's.
        cuda_graph: CUDA graphs on.
        attention: ``default`` (SGLang's choice) or a ``--attention-backend`` the e2e tier judges.
        flags: the configuration's other speculative flags, as given (``--name`` or ``--name=value``).
        concurrency: the phases' client counts (one at a time, 4, the configuration's ``--max-running-requests``).
        temperatures: ``0`` for greedy, ``1`` for ``T = 1`` (judged by the law).
        vocab: the served vocabulary (the model's).
        hybrid: the target is the Qwen3.5 family's hybrid class.
        ddtree_in_dflash: DDTree inside the DFlash worker (``--speculative-dflash-enable-ddtree``, a DFLASH replica).
        not_mirrored: what the replica cannot be, in words.
    """

    algorithm: str
    budget: int | None = None
    block_size: int = 16
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    cuda_graph: bool = True
    attention: str = "default"
    flags: tuple[str, ...] = ()
    concurrency: tuple[int, ...] = (1, 4)
    temperatures: tuple[float, ...] = (0.0,)
    vocab: int = 512
    hybrid: bool = False
    ddtree_in_dflash: bool = False
    not_mirrored: tuple[str, ...] = field(default=(), compare=False)

    def save(self, path: str | Path) -> Path:
        """Write the replica as JSON to ``path`` (what :data:`ENV` names); returns the path."""
        path = Path(path)
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Replica":
        d = json.loads(Path(path).read_text())
        for k in ("flags", "concurrency", "temperatures", "not_mirrored"):
            d[k] = tuple(d.get(k) or ())
        return cls(**d)

    def shape(self):
        """The tiny checkpoints' shape: the code padded to :attr:`vocab`, hybrid where the model is."""
        from . import checkpoints as ck

        base = ck.TinyShape(hybrid=self.hybrid)
        return ck.TinyShape(hybrid=self.hybrid, vocab_pad=max(0, self.vocab - base.vocab))


def from_env() -> Replica:
    """The replica named by :data:`ENV`.

    Raises:
        ValueError: the variable is unset or its file unreadable.
    """
    path = os.environ.get(ENV)
    if not path:
        raise ValueError(f"e2e profile {PROFILE!r} needs {ENV} (a replica file written by preflight)")
    try:
        return Replica.load(path)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"{ENV}={path}: not a replica file ({e})") from None


def _groups(argv: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """The launch flags as ``(--name, values)`` (``--name=value`` split)."""
    out: list[tuple[str, list[str]]] = []
    for word in argv:
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            out.append((name, [value] if eq else []))
        elif out:
            out[-1][1].append(word)
    return out


def from_serving(serving, model, temperatures: tuple[float, ...]) -> tuple[Replica | None, str]:
    """The replica of a resolved configuration (:class:`ddtree_compat.preflight.launch.Serving`) on a model shape
    (:class:`ddtree_compat.preflight.model.ModelShape`); ``(None, why)`` when no tiny draft exists for it."""
    from . import checkpoints as ck
    from .attention import ATTENTION_BACKENDS, SGLANG_CHOICE

    algo = "DFLASH" if serving.ddtree_in_dflash else serving.algorithm
    if algo not in ALGORITHMS:
        return None, (f"--speculative-algorithm {serving.algorithm or 'none'}: the replica's drafts are "
                      f"{', '.join(ALGORITHMS)}'s")
    not_mirrored = [f"head geometry and depth (the tiny target's {ck.TinyShape().heads} x {ck.TinyShape().head_dim}, "
                    f"not {model.heads} / {model.kv_heads} x {model.head_dim}: those are the geometry line's cells)",
                    "the draft checkpoint (the suite's always-agreeing draft serves)"]
    flags, passed = [], set(PASSED)
    for name, values in _groups(serving.argv):
        if name in STRUCTURED or not (name.startswith("--speculative-") or name in passed):
            continue
        if len(values) > 1:
            not_mirrored.append(f"{name} {' '.join(values)} (a flag of several values)")
        else:
            flags.append(f"{name}={values[0]}" if values else name)
    tp = int(serving.get("tp_size", 1) or 1)
    if tp > 1:
        not_mirrored.append(f"--tp {tp} (the replica serves on one GPU)")
    attention = serving.attention_backend or SGLANG_CHOICE
    if attention not in ATTENTION_BACKENDS:
        not_mirrored.append(f"--attention-backend {attention} (the e2e tier judges {', '.join(ATTENTION_BACKENDS[1:])} "
                            "and SGLang's choice: SGLang's choice serves)")
        attention = SGLANG_CHOICE
    base = ck.TinyShape(hybrid=model.hybrid)
    if model.vocab < base.vocab:
        not_mirrored.append(f"vocabulary {model.vocab} (the tiny code needs {base.vocab} tokens)")
    mrr = int(serving.max_running_requests or 0)
    conc = tuple(sorted({1, 4, *([min(mrr, MAX_CONCURRENCY)] if mrr > 4 else [])}))
    if mrr > MAX_CONCURRENCY:
        not_mirrored.append(f"--max-running-requests {mrr} (the replica's largest phase: {MAX_CONCURRENCY} clients)")
    topk = serving.topk
    steps = int(serving.get("speculative_num_steps") or 1)
    draft_tokens = int(serving.get("speculative_num_draft_tokens") or (steps + 1))
    return Replica(algo, serving.budget if algo == "DDTREE" else None, serving.block_size,
                   steps if algo in ("EAGLE", "STANDALONE") else None, topk if algo in ("EAGLE", "STANDALONE") else None,
                   draft_tokens if algo in ("EAGLE", "STANDALONE") else None, serving.graphs, attention, tuple(flags),
                   conc, temperatures, max(model.vocab, base.vocab), model.hybrid, serving.ddtree_in_dflash,
                   tuple(not_mirrored)), ""
