"""The server's command line: ``python -m sglang.launch_server ...`` for a :class:`~.configs.ServerConfig`, from the
flags the installed SGLang has (:class:`~.probe.Capabilities`), and why a configuration it cannot express is a skip.

* :func:`unavailable_reason`: why the installed SGLang cannot run a configuration (an algorithm, a module, a flag
  it lacks); a skip, never a pass.
* :func:`server_args`: the server's arguments, ports aside: radix cache off (its Rust extension panics on the lent
  H200), greedy requests need no tokenizer, one ``Decode batch`` line per decode batch, metrics on, the attention
  backend the configuration asks for (none for ``default``: SGLang chooses), CUDA graphs as configured, then the
  speculative flags.
* :func:`server_argv`: the whole command line, the ports added (picked at launch, :mod:`.ports`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import checkpoints as ck
from .attention import SGLANG_CHOICE
from .configs import DDTREE, ServerConfig, graph_batch_sizes, kv_tokens

# ``caps`` below: a :class:`.probe.Capabilities` (the probe imports this module for SERVER_MODULE)

SERVER_MODULE = os.environ.get("DDTREE_E2E_SERVER_MODULE", "sglang.launch_server")
"""The module run as the server (``python -m SERVER_MODULE``). Another module is a stand-in (the CPU tests'
``tests/e2e/fake_sglang.py``): it must answer ``--ddtree-probe`` with the probe's JSON line."""

DEFAULTS = {
    "mem_fraction_static": float(os.environ.get("DDTREE_E2E_MEM_FRACTION", "0.25")),
    "max_total_tokens": int(os.environ.get("DDTREE_E2E_MAX_TOTAL_TOKENS", "16384")),
}
"""Each server's slice of the one GPU (servers start together): ``--mem-fraction-static`` of the memory free at its
start and ``--max-total-tokens``."""


def unavailable_reason(config: ServerConfig, caps: Capabilities) -> str:
    """Why the installed SGLang cannot run ``config`` (``""`` when it can)."""
    if caps.error:
        return f"sglang server unavailable: {caps.error}"
    if config.speculative:
        if config.algorithm not in caps.algorithms:
            return (f"SpeculativeAlgorithm of sglang {caps.sglang} has no {config.algorithm} "
                    f"(members: {', '.join(caps.algorithms)})")
        if config.algorithm == ck.DFLASH and not caps.modules.get("flashinfer"):
            return ("DFLASH needs flashinfer, which does not import here: its draft sampling calls "
                    "flashinfer.sampling.top_p_renorm_probs on CUDA (sglang/kernels/ops/sampling/renorm.py)")
        if (config.cuda_graph and config.algorithm in (ck.EAGLE, ck.STANDALONE) and caps.eagle_graphs_import_flash_mla
                and not caps.modules.get("flash_mla")):
            return ("speculative CUDA graphs need flash_mla, which does not import here: capturing the draft "
                    "graphs imports FlashMLABackend whatever the attention backend "
                    "(sglang/srt/speculative/eagle_worker_v2.py, _capture_cuda_graphs)")
    missing = [f for f in _required_flags(config) if not caps.has(f)]
    if missing:
        return f"sglang {caps.sglang} has no {', '.join(missing)}"
    return ""


def _required_flags(config: ServerConfig) -> list[str]:
    flags = ["--model-path", "--host", "--port", "--attention-backend", "--sampling-backend",
             "--disable-radix-cache", "--skip-tokenizer-init", "--dtype", "--mem-fraction-static",
             "--max-total-tokens", "--enable-metrics", "--decode-log-interval"]
    if config.speculative:
        flags += ["--speculative-algorithm", "--speculative-draft-model-path"]
    if config.algorithm in (ck.EAGLE, ck.STANDALONE):
        flags += ["--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    if config.algorithm == ck.DFLASH:
        flags += ["--speculative-num-draft-tokens"]
    if config.algorithm == DDTREE:
        flags += ["--speculative-ddtree-budget"]
    return flags + [f.split("=")[0] for f in config.flags]  # a flag with its value: --name=value


def server_args(config: ServerConfig, caps: Capabilities, target: Path, draft: Path | None) -> list[str]:
    """The arguments of ``python -m SERVER_MODULE`` for ``config``, its ports aside (flags known to work on the lent
    H200, ``docs/findings.md``). ``--attention-backend`` is ``config.attention``, none for ``default`` (SGLang
    chooses). DDTREE adds ``--speculative-ddtree-budget B`` and the block size (``--speculative-ddtree-block-size``
    where it exists), then ``config.flags`` (prune, CPU build / follow, ``--speculative-dflash-enable-ddtree``).

    Raises:
        ValueError: ``config.attention`` is unset (:func:`.configs.plan` sets it on every configuration).
    """
    if not config.attention:
        raise ValueError(f"{config.id}: no attention backend set (plan() sets it: {SGLANG_CHOICE!r} or a name)")
    attn = [] if config.attention == SGLANG_CHOICE else ["--attention-backend", config.attention]
    args = ["--model-path", str(target), "--host", "127.0.0.1", *attn, "--sampling-backend", "pytorch",
            "--disable-radix-cache", "--skip-tokenizer-init", "--dtype", "bfloat16",
            "--mem-fraction-static", str(DEFAULTS["mem_fraction_static"]),
            "--max-total-tokens", str(max(DEFAULTS["max_total_tokens"], kv_tokens(config))),
            "--enable-metrics", "--decode-log-interval", "1"]
    if caps.has("--max-running-requests"):
        args += ["--max-running-requests", str(max(8, config.max_batch))]
    if caps.has("--random-seed"):
        args += ["--random-seed", "0"]
    args += _graph_flags(config, caps)
    if config.speculative:
        args += ["--speculative-algorithm", config.algorithm, "--speculative-draft-model-path", str(draft)]
    if config.algorithm in (ck.EAGLE, ck.STANDALONE):
        args += ["--speculative-num-steps", str(config.steps), "--speculative-eagle-topk", str(config.topk),
                 "--speculative-num-draft-tokens", str(config.draft_tokens)]
    elif config.algorithm == ck.DFLASH:
        args += ["--speculative-num-draft-tokens", str(config.draft_tokens)]
    elif config.algorithm == DDTREE:
        args += ["--speculative-ddtree-budget", str(config.budget)]
        block = "--speculative-ddtree-block-size" if caps.has("--speculative-ddtree-block-size") else \
            "--speculative-num-draft-tokens"
        args += [block, str(config.block_size)]
    return args + list(config.flags)


def server_argv(args: list[str] | tuple[str, ...], port: int, nccl_port: int | None = None,
                python: str = sys.executable) -> list[str]:
    """The whole command line: ``python -m SERVER_MODULE`` with ``args`` (:func:`server_args`), ``--port`` and
    ``--nccl-port`` when given (where the installed SGLang has the flag: :attr:`.launch.LaunchPlan.nccl_port`)."""
    ports = ["--port", str(port)] + (["--nccl-port", str(nccl_port)] if nccl_port is not None else [])
    return [python, "-m", SERVER_MODULE, *args, *ports]


def _graph_flags(config: ServerConfig, caps: Capabilities) -> list[str]:
    if not config.cuda_graph:
        if caps.has("--disable-cuda-graph"):
            return ["--disable-cuda-graph"]
        return ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
    captured = graph_batch_sizes(config)
    bs = str(max(captured))
    # prefill graphs are not under test (decode / verify graphs are); off where the flag exists, as the
    # DDTree build was seen serving on the H200 (docs/findings.md)
    prefill = ["--cuda-graph-backend-prefill", "disabled"] if caps.has("--cuda-graph-backend-prefill") else []
    out = []
    for flag in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"):
        if caps.has(flag):
            out = [flag, bs]
            break
    # the captured sizes, so live batches of 3, 5 and 6 replay a padded graph (SGLang's speculative default
    # captures every size up to 8); a server of hundreds of requests captures powers of two beyond
    for flag in ("--cuda-graph-bs-decode", "--cuda-graph-bs"):
        if caps.has(flag):
            out += [flag, *map(str, captured)]
            break
    return out + prefill
