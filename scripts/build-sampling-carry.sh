#!/usr/bin/env bash
# Build .carry/samp/ for scripts/sampling-device.sh (on a machine with network and this suite set up):
#     DDTREE_IMPLS=... bash scripts/build-sampling-carry.sh [OUT_DIR]      (OUT_DIR default .carry/samp)
# fihdr.tar.gz: a headers-only `flashinfer` package from the installed flashinfer-python (its data/include) with
# cuRAND's headers (from nvidia-curand) in data/csrc and the empty folders SGLang's JIT dependency check wants;
# impls.tar.gz: the DDTree modules of each tree of DDTREE_IMPLS (':'-separated) with its ddtree-impl.json;
# covertable's wheel (the exact grids' covering arrays).
set -euo pipefail
OUT=${1:-.carry/samp}
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fi_dir=$("$PY" -c "import flashinfer, os; print(os.path.dirname(flashinfer.__file__))")
curand=$("$PY" -c "import importlib.metadata as m; print(m.distribution('nvidia-curand').locate_file('nvidia/cu13/include'))")
pkg=$work/fi/flashinfer
mkdir -p "$pkg/data/csrc" "$pkg/data/cutlass/include" "$pkg/data/cutlass/tools/util/include" "$pkg/data/spdlog/include"
: > "$pkg/__init__.py"
cp -r "$fi_dir/data/include" "$pkg/data/"
cp "$curand"/curand*.h "$pkg/data/csrc/"
mkdir -p "$OUT"
tar -C "$work/fi" -czf "$OUT/fihdr.tar.gz" flashinfer
for tree in ${DDTREE_IMPLS//:/ }; do
  name=$(basename "$tree")
  mkdir -p "$work/impls/$name/python/sglang"
  [ -f "$tree/ddtree-impl.json" ] && cp "$tree/ddtree-impl.json" "$work/impls/$name/"
  : > "$work/impls/$name/python/sglang/__init__.py"
  for f in kernels/ops/speculative/ddtree.py srt/speculative/triton_ops/ddtree.py srt/speculative/ddtree_utils.py \
           srt/speculative/dflash_utils.py; do
    if [ -f "$tree/python/sglang/$f" ]; then
      mkdir -p "$work/impls/$name/python/sglang/$(dirname "$f")"
      cp "$tree/python/sglang/$f" "$work/impls/$name/python/sglang/$f"
    fi
  done
done
tar -C "$work/impls" -czf "$OUT/impls.tar.gz" .
"$PY" -m pip download -q --no-deps -d "$OUT" "covertable==3.2.0"  # pure Python; the lent host's site lacks it
ls -la "$OUT"
