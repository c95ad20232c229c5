"""Asking the installed SGLang what it offers, in a child with the servers' environment (never imported here).

* :func:`probe`: which command-line flags ``ServerArgs`` defines, which ``SpeculativeAlgorithm`` members exist, which
  optional modules import (``flashinfer`` for DFLASH, sgl-kernel's ``flash_ops`` for FA3), which
  ``--attention-backend`` values it accepts, the GPU's compute capability as its torch sees it, and whether the HTTP
  server imports at all (:class:`Capabilities`).
* :func:`resolve_attention`: which attention backend SGLang would choose for each configuration here: a child builds
  SGLang's own ``ServerArgs`` from the server's arguments without ``--attention-backend`` (``prepare_server_args``,
  which runs SGLang's selection) and reads ``attention_backend`` back; the suite keeps no copy of SGLang's table.
* :func:`attention_reason`: why a backend cannot serve here (``fa3`` off sm80/sm90 or without ``flash_ops``;
  ``flashinfer`` not importable); :func:`missing_attention`: names the installed ``--attention-backend`` lacks.
* :func:`server_env`: the servers' (and the probes') environment.

A stand-in server module (:data:`.command.SERVER_MODULE`, the CPU tests' ``tests/e2e/fake_sglang.py``) answers
``--ddtree-probe`` and ``--ddtree-resolve-attention`` with the same JSON lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from ..identity import identify
from .command import SERVER_MODULE

_PROBE = r"""
import importlib, importlib.util, json, sys
out = {"python": sys.version.split()[0], "error": None, "flags": [], "algorithms": [], "modules": {}}
try:
    import sglang
    out["sglang"] = getattr(sglang, "__version__", None)
    import argparse
    from sglang.srt.server_args import ServerArgs
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    out["flags"] = sorted(o for a in p._actions for o in a.option_strings)
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    out["algorithms"] = [m.name for m in SpeculativeAlgorithm]
    for m in ("flashinfer", "flash_mla", "sgl_kernel", "uvicorn", "fastapi", "prometheus_client", "transformers"):
        out["modules"][m] = importlib.util.find_spec(m) is not None
    import os
    out["path"] = os.path.dirname(sglang.__file__)
    try:  # the distribution whose files are this package (PEP 610 direct_url.json: a VCS install's commit)
        import importlib.metadata as md
        dist = md.distribution("sglang")
        if os.path.realpath(str(dist.locate_file("sglang"))) == os.path.realpath(out["path"]):
            out["dist_version"] = dist.version
            text = dist.read_text("direct_url.json")
            out["direct_url"] = json.loads(text) if text else None
    except Exception:
        pass
    for action in p._actions:  # the --attention-backend values this SGLang accepts
        if "--attention-backend" in action.option_strings:
            out["attention_choices"] = sorted(str(c) for c in (action.choices or ()))
    try:  # FA3's kernels (sgl-kernel's compiled flash_ops)
        out["modules"]["sgl_kernel.flash_ops"] = importlib.util.find_spec("sgl_kernel.flash_ops") is not None
    except Exception:
        out["modules"]["sgl_kernel.flash_ops"] = False
    try:
        import torch
        if torch.cuda.is_available():
            out["capability"] = list(torch.cuda.get_device_capability(0))
    except Exception:
        pass
    spec = importlib.util.find_spec("sglang.srt.speculative.eagle_worker_v2")
    if spec is not None and spec.origin:  # SGLang 0.5.23 imports FlashMLABackend when it captures draft graphs
        out["eagle_graphs_import_flash_mla"] = "FlashMLABackend" in open(spec.origin, encoding="utf-8").read()
    importlib.import_module("sglang.srt.entrypoints.http_server")
except ImportError as e:  # SGLang or a module it needs is not installed: the servers cannot run here
    out["error"] = f"{type(e).__name__}: {e}"[:600]
except Exception as e:  # the installed SGLang broke in another way: an error, reported as such
    import traceback
    out["failure"] = " | ".join(traceback.format_exception_only(type(e), e)).strip()[:600]
print("DDTREE_PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Capabilities:
    """What the installed SGLang offers (from :func:`probe`).

    Attributes:
        sglang: version string.
        flags: every ``--option`` of ``ServerArgs``.
        algorithms: ``SpeculativeAlgorithm`` member names.
        modules: optional modules -> importable (``flashinfer``, ``sgl_kernel``, ...).
        error: the module that is missing here, when SGLang (or its HTTP server) does not import for that
            reason (the cells skip with it), else ``None``.
        failure: why the probe failed otherwise (it raised something else, printed nothing or hung): the
            cells are ``error``, never a skip; else ``None``.
        attention_choices: the values ``--attention-backend`` accepts (``()`` when unknown).
        capability: ``(major, minor)`` of GPU 0 as the server's torch sees it (``None`` when unknown).
        implementation: :meth:`ddtree_compat.identity.ImplIdentity.as_json` of the imported ``sglang``
            (repository and commit where known).
        eagle_graphs_import_flash_mla: the EAGLE worker imports ``FlashMLABackend`` while it captures the
            draft's CUDA graphs (SGLang 0.5.23), so EAGLE / STANDALONE graphs need ``flash_mla``.
    """

    sglang: str | None = None
    flags: frozenset[str] = frozenset()
    algorithms: tuple[str, ...] = ()
    modules: dict[str, bool] = field(default_factory=dict)
    error: str | None = None
    implementation: dict = field(default_factory=dict)
    eagle_graphs_import_flash_mla: bool = True
    failure: str | None = None
    attention_choices: tuple[str, ...] = ()
    capability: tuple[int, int] | None = None

    def has(self, flag: str) -> bool:
        return flag in self.flags


def server_env(base: dict | None = None) -> dict[str, str]:
    """The server child's environment: this process's (``PYTHONPATH`` and SGLang settings included),
    offline hub, unbuffered output, no Triton interpreter, no shared Prometheus directory."""
    env = dict(os.environ if base is None else base)
    env.pop("TRITON_INTERPRET", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each server makes its own: shared, their metrics would mix
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    return env


def probe(env: dict[str, str] | None = None, python: str = sys.executable, timeout: float = 240.0) -> Capabilities:
    """Run the probe in a child process (same interpreter and environment as the servers)."""
    cmd = [python, "-c", _PROBE] if SERVER_MODULE == "sglang.launch_server" else [python, "-m", SERVER_MODULE,
                                                                                  "--ddtree-probe"]
    try:
        proc = subprocess.run(cmd, env=server_env(env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Capabilities(failure=f"probe of the installed SGLang timed out after {timeout:.0f}s")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DDTREE_PROBE ")), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Capabilities(failure=f"probe exited {proc.returncode} without its line: {' | '.join(tail)[:600]}")
    d = json.loads(line[len("DDTREE_PROBE "):])
    impl = identify(d.get("path") or "", d.get("dist_version") or d.get("sglang"), d.get("direct_url"),
                    server_env(env))
    cap = d.get("capability")
    return Capabilities(d.get("sglang"), frozenset(d.get("flags", ())), tuple(d.get("algorithms", ())),
                        d.get("modules", {}), d.get("error"), impl.as_json(),
                        bool(d.get("eagle_graphs_import_flash_mla", True)), d.get("failure"),
                        tuple(d.get("attention_choices") or ()), tuple(cap) if cap else None)


_RESOLVE = r"""
import json, sys
out = {}
try:
    from sglang.srt.server_args import prepare_server_args
except Exception as e:
    print("DDTREE_ATTN " + json.dumps({"*": {"error": f"{type(e).__name__}: {e}"[:400]}}))
    raise SystemExit(0)
for cid, argv in json.load(sys.stdin).items():
    try:
        sa = prepare_server_args(argv)
        out[cid] = {"attention_backend": sa.attention_backend,
                    "prefill": getattr(sa, "prefill_attention_backend", None),
                    "decode": getattr(sa, "decode_attention_backend", None)}
    except BaseException as e:  # SystemExit from argparse included
        out[cid] = {"error": f"{type(e).__name__}: {e}"[:400]}
print("DDTREE_ATTN " + json.dumps(out))
"""


def resolve_attention(argvs: dict[str, list[str]], env: dict[str, str] | None = None, python: str = sys.executable,
                      timeout: float = 300.0) -> dict[str, dict]:
    """SGLang's own attention choice per configuration: ``argvs`` maps an id to the server's command line
    (after ``-m MODULE``, without ``--attention-backend``); the answer maps it to ``{"attention_backend":
    name, ...}`` or ``{"error": why}``. A stand-in server module answers ``--ddtree-resolve-attention``."""
    cmd = [python, "-c", _RESOLVE] if SERVER_MODULE == "sglang.launch_server" else [
        python, "-m", SERVER_MODULE, "--ddtree-resolve-attention"]
    try:
        proc = subprocess.run(cmd, env=server_env(env), input=json.dumps(argvs), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {cid: {"error": f"resolving SGLang's attention choice timed out after {timeout:.0f}s"} for cid in argvs}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DDTREE_ATTN ")), None)
    if line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[:400]
        return {cid: {"error": f"attention probe exited {proc.returncode} without its line: {tail}"} for cid in argvs}
    got = json.loads(line[len("DDTREE_ATTN "):])
    if "*" in got:
        return {cid: got["*"] for cid in argvs}
    return {cid: got.get(cid, {"error": "attention probe gave no answer for it"}) for cid in argvs}


FA3_ARCHS = (8, 9)
"""Compute-capability majors FA3 serves (sm80 and sm90 families)."""


def attention_reason(name: str, caps: Capabilities) -> str:
    """Why attention backend ``name`` cannot serve here (``""`` when it can, or when nothing rules it out)."""
    if name == "fa3":
        if caps.capability is not None and caps.capability[0] not in FA3_ARCHS:
            major, minor = caps.capability
            return f"fa3 serves sm80/sm90 only; this GPU is sm{major}{minor}"
        if not caps.modules.get("sgl_kernel.flash_ops"):
            return "fa3 needs sgl-kernel's flash_ops, which does not import here (sgl_kernel.flash_ops missing)"
    if name == "flashinfer" and not caps.modules.get("flashinfer"):
        return "flashinfer does not import here"
    return ""


def missing_attention(names, caps: Capabilities) -> list[str]:
    """Of ``names`` (``default`` aside), those the installed SGLang's ``--attention-backend`` does not accept
    (none when the probe could not read its choices)."""
    if not caps.attention_choices:
        return []
    return [n for n in names if n != "default" and n not in caps.attention_choices]
