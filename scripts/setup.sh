#!/usr/bin/env bash
# Install ddtree-compat with SGLang's kernels on a fresh machine (CPU or GPU).
#   - torch: kept if importable (the GPU host's CUDA build); else torch==2.13.0 (the CPU build).
#   - SGLang 0.5.23 with --no-deps plus the modules its kernels import (requirements/sglang-kernels.txt).
#   - the static tier's cuobjdump/nvdisasm and ninja (requirements/static.txt; nvcc: the CUDA toolkit's).
#   - transformers for the cross-checks of the tiny checkpoints (requirements/crosscheck.txt): kept if
#     importable (a GPU host's own, which its SGLang trees were tested with), else the pinned one.
#   - this package, editable, with its pytest plugin.
# Override the SGLang version with SGLANG_VERSION=... (the upgrade gate's candidate).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP="$PY -m pip install -q --disable-pip-version-check"
SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}
if ! $PY -c "import torch" 2>/dev/null; then
  $PIP "torch==2.13.0"
fi
$PIP -r requirements/sglang-kernels.txt -r requirements/static.txt
if ! $PY -c "import transformers" 2>/dev/null; then
  $PIP -r requirements/crosscheck.txt
fi
$PIP --no-deps "sglang==${SGLANG_VERSION}"
$PIP -e .
$PY - <<'PY'
import importlib
for m in ("sglang.kernels.ops.speculative.spec_tree", "ddtree_compat.plugin"):
    importlib.import_module(m)
import sglang, torch, transformers, triton
print(f"setup ok: sglang {sglang.__version__}, torch {torch.__version__}, triton {triton.__version__}, "
      f"transformers {transformers.__version__}")
PY
