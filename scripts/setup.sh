#!/usr/bin/env bash
# Install ddtree-compat with SGLang's kernels on a fresh machine (CPU or GPU); prints one line when all is well.
#   - torch: kept if importable (the GPU host's CUDA build); else torch==2.13.0.
#   - this package, editable (it registers the pytest plugin), with its extras: `kernels` (the modules SGLang's
#     kernels import) and `static` (the static tier's cuobjdump/nvdisasm and ninja; nvcc: the CUDA toolkit's).
#   - transformers for the cross-checks of the tiny checkpoints (requirements/crosscheck.txt): kept if
#     importable (a GPU host's own, which its SGLang trees were tested with), else the pinned one.
#   - flashinfer-python at the version that SGLang pins, with --no-deps (the static tier's FlashInfer cells).
#   - nvidia-cutlass-dsl at the version that SGLang pins (the static tier's CuTe DSL cells).
#   - SGLang 0.5.23 with --no-deps: its server pins (a CUDA torch of several GB) are not wanted here, so pip's
#     "dependency conflicts" report about them is expected; it goes to the log, and only conflicts of other
#     packages are shown.
# Override the SGLang version with SGLANG_VERSION=... (the upgrade gate's candidate), the interpreter with PYTHON=.
# pip's full output: $SETUP_LOG (default: a new ${TMPDIR:-/tmp}/ddtree-compat-setup.XXXXXX per run, named in its
# `setup ok` line, so two set-ups at once never write one log).
# The editable install points ddtree-compat at this checkout: in an interpreter where another checkout was
# installed, that one is replaced (the `setup ok` line names the checkout, and the one it replaced).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}
LOG=${SETUP_LOG:-$(mktemp "${TMPDIR:-/tmp}/ddtree-compat-setup.XXXXXX")}
: > "$LOG"
export DDTREE_SETUP_LOG=$LOG  # named in the `setup ok` line

note() { echo "setup: $*" >>"$LOG"; }  # what set-up decided, in the log beside pip's output

pip_install() {  # quiet pip; on failure its last lines and the log's path
  note "pip install $*"
  if ! "$PY" -m pip install -q --disable-pip-version-check --no-warn-conflicts "$@" >>"$LOG" 2>&1; then
    tail -n 15 "$LOG" >&2
    if grep -q "externally-managed-environment" "$LOG"; then  # PEP 668: Debian's / Ubuntu's own python3
      echo "setup: $PY is managed by the OS, which refuses pip installs into it: make a virtualenv" \
        "(python3 -m venv .venv && . .venv/bin/activate) and run set-up again" >&2
    fi
    echo "setup: pip install $* failed (full output: $LOG)" >&2
    exit 1
  fi
}

if "$PY" -c "import torch" 2>/dev/null; then
  note "torch importable: kept"
else
  pip_install "torch==2.13.0"
fi
# Which checkout an earlier editable install pointed at (named in the `setup ok` line when this one replaces it).
DDTREE_SETUP_REPLACED=$("$PY" - <<'PY' 2>/dev/null || true
import json
from importlib.metadata import distribution
from urllib.parse import unquote, urlparse
url = json.loads(distribution("ddtree-compat").read_text("direct_url.json") or "{}").get("url", "")
print(unquote(urlparse(url).path) if url.startswith("file://") else "")
PY
)
export DDTREE_SETUP_REPLACED
pip_install -e ".[kernels,static]"
# The editable build leaves ddtree_compat.egg-info in the checkout: on sys.path from the checkout's root (python -m
# pytest), it is a second distribution of this package, and pytest would then assertion-rewrite every module of it.
rm -rf ddtree_compat.egg-info
if "$PY" -c "import transformers" 2>/dev/null; then
  note "transformers importable: kept"
else
  pip_install -r requirements/crosscheck.txt
fi
pip_install --no-deps "sglang==${SGLANG_VERSION}"
# FlashInfer at the version that SGLang pins (its default verify attention on sm120): the static tier builds its
# custom-mask prefill for every arch, the device tier runs it. --no-deps: its CUDA-side pins (cutlass-dsl, cudnn
# frontend, ~200 MB) serve its runtime on a GPU host, not its JIT build.
FLASHINFER_PIN=$("$PY" - <<'PY'
import re
from importlib.metadata import requires
pins = [re.match(r"flashinfer[-_]python(\[[^]]*\])?\s*==\s*([^;\s]+)", r) for r in requires("sglang") or []]
print(next((m.group(2) for m in pins if m), ""))
PY
)
if [ -n "$FLASHINFER_PIN" ]; then
  pip_install --no-deps "flashinfer-python==${FLASHINFER_PIN}"
else
  note "sglang ${SGLANG_VERSION} pins no flashinfer-python: none installed"
fi
# CuTe DSL at the version SGLang pins (nvidia-cutlass-dsl, ~260 MB): the static tier compiles SGLang's CuTe DSL GDN
# verify kernel with it for each arch, on a machine without that GPU.
CUTEDSL_PIN=$("$PY" - <<'PY'
import re
from importlib.metadata import requires
pins = [re.match(r"nvidia-cutlass-dsl(\[[^]]*\])?\s*==\s*([^;\s]+)", r) for r in requires("sglang") or []]
print(next((m.group(2) for m in pins if m), ""))
PY
)
if [ -n "$CUTEDSL_PIN" ]; then
  pip_install "nvidia-cutlass-dsl==${CUTEDSL_PIN}"
else
  note "sglang ${SGLANG_VERSION} pins no nvidia-cutlass-dsl: none installed"
fi
# Conflicts that are not sglang's own unmet pins (those are by design) are worth reading.
"$PY" -m pip check --disable-pip-version-check 2>/dev/null | grep -v -E "^(sglang|flashinfer-python|No broken)" >&2 || true
"$PY" - <<'PY'
import importlib
for m in ("sglang.kernels.ops.speculative.spec_tree", "ddtree_compat.plugin"):
    importlib.import_module(m)
import os
import ddtree_compat, sglang, torch, transformers, triton
from importlib.metadata import PackageNotFoundError, version
try:
    fi = f"flashinfer-python {version('flashinfer-python')}, "
except PackageNotFoundError:
    fi = "no flashinfer pin in this sglang, "
here = os.path.dirname(os.path.dirname(ddtree_compat.__file__))
before = os.environ.get("DDTREE_SETUP_REPLACED", "")
replaced = (f" (it replaced the one from {before})"
            if before and os.path.realpath(before) != os.path.realpath(here) else "")
print(f"setup ok: sglang {sglang.__version__} (--no-deps: its server pins left out), {fi}torch {torch.__version__}, "
      f"triton {triton.__version__}, transformers {transformers.__version__}, ddtree-compat editable from "
      f"{here}{replaced} with its pytest plugin; pip's output: {os.environ['DDTREE_SETUP_LOG']}")
from importlib.util import find_spec
left = [what for module, what in (("torchvision", "torchvision (SGLang's KV-cache kernel modules import it)"),
                                  ("sgl_kernel", "sglang-kernel (its prebuilt libraries' static cells)"))
        if find_spec(module) is None]
if left:
    print(f"not installed (left out on purpose: set-up installs neither): {'; '.join(left)}. Their cells skip, "
          "each saying what is missing; to add them, see the table in docs/installing.md")
PY
