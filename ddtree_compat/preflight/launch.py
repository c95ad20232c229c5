"""A serving configuration as the installed SGLang reads it: its own ``ServerArgs`` parses the launch flags in a
child process (never imported here), and resolves them where it can (:func:`read_launch`).

The child prints one JSON line: every field :data:`FIELDS` names that this SGLang has, whether resolution ran
(``ServerArgs.resolve_once`` where the release has it; older releases resolve while parsing), and why not. A CPU
box without the GPU stack cannot resolve what SGLang picks by GPU (the attention backend, the page size, the
CUDA-graph batch sizes): those stay as given, and :class:`Serving` says so. The suite keeps no copy of SGLang's rules.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DDTreeInputError

FIELDS = (
    "model_path", "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_ddtree_budget",
    "speculative_ddtree_block_size", "speculative_dflash_block_size", "speculative_dflash_enable_ddtree",
    "is_ddtree_prune", "speculative_ddtree_cuda_graph_buckets", "page_size", "attention_backend",
    "decode_attention_backend", "prefill_attention_backend", "linear_attn_backend", "linear_attn_verify_backend",
    "max_running_requests", "context_length", "kv_cache_dtype", "mamba_ssm_dtype", "disable_cuda_graph",
    "cuda_graph_bs", "cuda_graph_max_bs", "cuda_graph_bs_decode", "cuda_graph_max_bs_decode", "dtype",
    "sampling_backend",
)
"""The ``ServerArgs`` fields preflight reads (a release without one gives none for it)."""

_CHILD = r"""
import json, sys
fields = json.loads(sys.argv[1]); argv = json.loads(sys.stdin.read())
try:
    from sglang.srt.server_args import prepare_server_args
except Exception as e:
    missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    print("DDTREE_LAUNCH " + json.dumps({"import_error": f"{type(e).__name__}: {e}"[:400], "missing": missing}))
    raise SystemExit(0)
try:
    sa = prepare_server_args(argv)
except SystemExit as e:  # argparse's own error: its message is on stderr already
    print("DDTREE_LAUNCH " + json.dumps({"rejected": True, "status": e.code})); raise SystemExit(0)
except ImportError as e:  # a module SGLang imports while it reads the flags: this Python's, not the user's flags
    print("DDTREE_LAUNCH " + json.dumps({"broken": f"{type(e).__name__}: {e}"[:400]})); raise SystemExit(0)
except Exception as e:
    print("DDTREE_LAUNCH " + json.dumps({"rejected": True, "message": f"{type(e).__name__}: {e}"[:600]}))
    raise SystemExit(0)
out = {"resolved": True, "unresolved": ""}
resolve = getattr(sa, "resolve_once", None)
if resolve is not None:
    try:
        resolve()
    except BaseException as e:
        out["resolved"] = False
        out["unresolved"] = f"{type(e).__name__}: {e}"[:400]
def plain(v):
    return v if v is None or isinstance(v, (bool, int, float, str)) else (
        [plain(x) for x in v] if isinstance(v, (list, tuple)) else str(v))
out["fields"] = {f: plain(getattr(sa, f)) for f in fields if hasattr(sa, f)}
print("DDTREE_LAUNCH " + json.dumps(out))
"""


class LaunchError(DDTreeInputError):
    """The launch flags cannot be read: SGLang rejected them (its own message), or no SGLang parses them here."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.field, self.value, self.allowed, self.problem, self.where = "launch", None, "", message, ""


@dataclass(frozen=True)
class Serving:
    """One serving configuration as SGLang resolved it (``fields``: :data:`FIELDS` this SGLang has).

    Attributes:
        argv: the launch flags as given.
        fields: ``ServerArgs`` field -> value after parsing (and resolution where it ran).
        resolved: SGLang's resolution ran here; otherwise ``unresolved`` says why, and what SGLang picks by GPU
            (attention backend, page size, CUDA-graph batch sizes) is as given or unknown.
        parsed: SGLang's own parser read the flags; ``False``: its ``server_args`` cannot be imported in this Python
            (a module it imports is not installed: ``torchvision`` on a CPU box), so ``fields`` are the flags as
            given (:func:`as_given`), SGLang's defaults unknown, and no flag was judged.
    """

    argv: tuple[str, ...]
    fields: dict = field(default_factory=dict)
    resolved: bool = True
    unresolved: str = ""
    parsed: bool = True

    def get(self, name: str, default=None):
        value = self.fields.get(name)
        return default if value is None else value

    @property
    def algorithm(self) -> str:
        """``DDTREE``, ``DFLASH``, ``EAGLE``, ... (``""``: no speculative decoding)."""
        return str(self.get("speculative_algorithm", "") or "").upper()

    @property
    def ddtree_in_dflash(self) -> bool:
        """DDTree inside the DFlash worker (``--speculative-dflash-enable-ddtree``)."""
        return self.algorithm == "DFLASH" and bool(self.get("speculative_dflash_enable_ddtree", False))

    @property
    def block_size(self) -> int:
        """The drafter's block size (DDTREE / DFLASH); 16 when neither flag nor draft tokens say."""
        for name in ("speculative_ddtree_block_size", "speculative_dflash_block_size"):
            if self.get(name):
                return int(self.get(name))
        if self.algorithm in ("DDTREE", "DFLASH") and self.get("speculative_num_draft_tokens"):
            return int(self.get("speculative_num_draft_tokens"))
        return 16

    @property
    def budget(self) -> int | None:
        """Drafted nodes verified per round, the root not counted (``None``: no speculative decoding)."""
        if self.algorithm == "DDTREE":
            return int(self.get("speculative_ddtree_budget", self.block_size - 1))
        if self.algorithm == "DFLASH":
            return self.block_size - 1
        if self.algorithm and self.get("speculative_num_draft_tokens"):
            return int(self.get("speculative_num_draft_tokens")) - 1
        return None

    @property
    def topk(self) -> int:
        return int(self.get("speculative_eagle_topk", 1))

    @property
    def graphs(self) -> bool:
        return not self.get("disable_cuda_graph", False)

    @property
    def page_size(self) -> int | None:
        return self.get("page_size")

    @property
    def attention_backend(self) -> str | None:
        return self.get("attention_backend") or self.get("decode_attention_backend")

    @property
    def max_running_requests(self) -> int | None:
        return self.get("max_running_requests")

    @property
    def sampling_backend(self) -> str | None:
        return self.get("sampling_backend")


def from_file(path: str | Path) -> list[str]:
    """The launch flags of a launch script or a saved command line: the words after ``sglang.launch_server`` (or
    ``sglang serve``) when the file names it, else every word; backslash-newlines and ``#`` comments dropped.

    Raises:
        LaunchError: the file cannot be read.
    """
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise LaunchError(f"--from-file {path}: {e.strerror or e}") from None
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    for marker in ("sglang.launch_server", "serve"):
        if marker in words:
            return words[words.index(marker) + 1:]
    return words


def _word(value: str):
    return int(value) if value.lstrip("-").isdigit() else value


def as_given(argv) -> dict:
    """The :data:`FIELDS` that ``argv`` gives, as ``--field-name VALUE`` / ``--field-name=VALUE`` words (integers as
    ``int``, a flag of several values as a list, a flag without a value as ``True``): a configuration no SGLang could
    parse here. No default and no rule of SGLang's is applied."""
    out, i = {}, 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        values = [value] if eq else []
        while not eq and i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        name = name.replace("-", "_")
        if name in FIELDS:
            out[name] = True if not values else _word(values[0]) if len(values) == 1 else [_word(v) for v in values]
    return out


def read_launch(argv: list[str], python: str = sys.executable, env: dict | None = None,
                timeout: float = 300.0) -> Serving:
    """Parse ``argv`` (the flags of ``sglang.launch_server``) with the installed SGLang in a child.

    Where SGLang is installed but its ``server_args`` cannot be imported here for a module that is not installed
    (``torchvision`` on a CPU box), the flags are taken as given (:func:`as_given`; ``parsed`` false), and the
    returned :class:`Serving` says why.

    Raises:
        LaunchError: SGLang rejected a flag (its own message), or no SGLang could parse them here.
    """
    try:
        proc = subprocess.run([python, "-c", _CHILD, json.dumps(FIELDS)], input=json.dumps(list(argv)),
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"SGLang's ServerArgs did not answer within {timeout:.0f}s") from None
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DDTREE_LAUNCH ")), None)
    if line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])[:400]
        raise LaunchError(f"SGLang's ServerArgs exited {proc.returncode} without an answer: {tail}")
    got = json.loads(line[len("DDTREE_LAUNCH "):])
    if "import_error" in got:
        missing = (got.get("missing") or "").split(".")[0]
        if missing and missing != "sglang":  # SGLang is here; a module its server_args imports is not
            why = f"SGLang's server_args cannot be imported here ({got['import_error']}); no flag was judged"
            return Serving(tuple(argv), as_given(argv), False, why, parsed=False)
        raise LaunchError(f"no SGLang to read the launch flags with here ({got['import_error']})")
    if "broken" in got:
        raise LaunchError(f"SGLang could not read the launch flags in this Python ({got['broken']}): a module it "
                          "imports is missing or of another version here; the flags themselves were not judged")
    if got.get("rejected"):
        said = [ln for ln in proc.stderr.strip().splitlines() if "error:" in ln]
        raise LaunchError("SGLang rejected the launch flags: " + (said[-1].split("error:", 1)[1].strip() if said
                                                                  else got.get("message", "no message")))
    return Serving(tuple(argv), got.get("fields", {}), bool(got.get("resolved", True)), got.get("unresolved", ""))
