#!/usr/bin/env bash
# Assemble what scripts/build-ddtree-carry.sh bundled, on the GPU host (run after every part is staged in
# /tmp/ddt/parts):   bash scripts/ddtree-device-setup.sh [CARRY_DIR_WITH_bundle.sha256]
# Unpacks the dependency site into /tmp/ddt/site, installs the wheels into /tmp/ddt/whl
# (pip --no-index --no-deps --target), unpacks each DDTree tree into /tmp/ddt/impl/<name>/python and
# writes /tmp/ddt/env.sh (source it: PYTHONPATH for the first implementation, SGLang settings, a shared
# flashinfer JIT cache) and /tmp/ddt/impl/<name>/env.sh per implementation. Idempotent (a second run
# while the machine is warm does nothing).
set -euo pipefail
ROOT=/tmp/ddt
CHECK=${1:-}
if [ ! -f "$ROOT/.ok" ]; then
  if [ -n "$CHECK" ] && [ -f "$CHECK/bundle.sha256" ]; then
    want=$(cat "$CHECK/bundle.sha256"); got=$(cat "$ROOT"/parts/part_* | sha256sum | cut -d' ' -f1)
    [ "$want" = "$got" ] || { echo "bundle checksum mismatch (parts missing?): $(ls "$ROOT/parts")" >&2; exit 2; }
  fi
  mkdir -p "$ROOT/b" "$ROOT/site" "$ROOT/whl" "$ROOT/impl"
  cat "$ROOT"/parts/part_* | tar -C "$ROOT/b" -xf -
  xz -d -T4 < "$ROOT/b/site.tar.xz" | tar -C "$ROOT/site" -xf -
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$ROOT/whl" "$ROOT"/b/whl/*.whl
  while IFS=$'\t' read -r name repo branch commit; do
    mkdir -p "$ROOT/impl/$name"
    tar -xJf "$ROOT/b/impl/$name.tar.xz" -C "$ROOT/impl/$name"
    cat > "$ROOT/impl/$name/env.sh" <<EOF
export PYTHONPATH=$ROOT/impl/$name/python:$ROOT/site:$ROOT/site/nvidia_cutlass_dsl/dsl_packages:$ROOT/whl
export DDTREE_E2E_IMPL="$name $repo@$commit ($branch)"
EOF
  done < "$ROOT/b/impl/impls.tsv"
  first=$(head -1 "$ROOT/b/impl/impls.tsv" | cut -f1)
  cat > "$ROOT/env.sh" <<EOF
. $ROOT/impl/$first/env.sh
export SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# one flashinfer JIT cache for every server (flashinfer/jit/env.py reads FLASHINFER_WORKSPACE_BASE)
export FLASHINFER_WORKSPACE_BASE=$ROOT/fi-cache
EOF
  rm -rf "$ROOT/b" "$ROOT/parts"
  # bytecode, as pip would have written it at install (the lent host writes none: scripts/device-bytecode.sh)
  bash "$(dirname "$0")/device-bytecode.sh" "$ROOT/site" "$ROOT/whl" "$ROOT/impl"
  touch "$ROOT/.ok"
fi
# the older trees' pins (sglang-kernel 0.4.3, flashinfer 0.6.12), when scripts/build-ddtree-carry.sh's
# ddt-legacy folder was staged: put in front of the shared site for those trees
if [ -f "$ROOT/legacy/legacy.tar" ] && [ ! -f "$ROOT/legacy/.ok" ]; then
  mkdir -p "$ROOT/legacy/b" "$ROOT/legacy/site" "$ROOT/legacy/whl"
  tar -C "$ROOT/legacy/b" -xf "$ROOT/legacy/legacy.tar"
  xz -d -T4 < "$ROOT/legacy/b/site.tar.xz" | tar -C "$ROOT/legacy/site" -xf -
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$ROOT/legacy/whl" \
    "$ROOT"/legacy/b/whl/*.whl
  for name in $(cat "$ROOT/legacy/b/impls.txt"); do
    [ -f "$ROOT/impl/$name/env.sh" ] || continue
    sed -i "s#^export PYTHONPATH=$ROOT/impl/$name/python:#export PYTHONPATH=$ROOT/impl/$name/python:$ROOT/legacy/site:$ROOT/legacy/whl:#" \
      "$ROOT/impl/$name/env.sh"
    echo "$name: sglang-kernel 0.4.3 and flashinfer 0.6.12 in front"
  done
  rm -rf "$ROOT/legacy/b" "$ROOT/legacy/legacy.tar"
  touch "$ROOT/legacy/.ok"
fi
# sgl-kernel's FA3 library, when scripts/build-fa3-carry.sh's parts were staged (every part: FA3_PARTS's count and
# checksum): next to the carry's sgl_kernel (the older trees' 0.4.3 in front has none: fa3 stays a skip for them)
if [ -f /tmp/fa3parts/FA3_PARTS ] && [ ! -f "$ROOT/site/sgl_kernel/flash_ops.abi3.so" ]; then
  read -r n sum < /tmp/fa3parts/FA3_PARTS
  got=$(cat /tmp/fa3parts/part_* | sha256sum | cut -d' ' -f1)
  if [ "$(ls /tmp/fa3parts/part_* | wc -l)" = "$n" ] && [ "$got" = "$sum" ]; then
    cat /tmp/fa3parts/part_* | xz -d -T8 > "$ROOT/site/sgl_kernel/flash_ops.abi3.so.part" &&
      mv "$ROOT/site/sgl_kernel/flash_ops.abi3.so.part" "$ROOT/site/sgl_kernel/flash_ops.abi3.so" &&
      echo "fa3: flash_ops.abi3.so in $ROOT/site/sgl_kernel"
  else
    echo "fa3 parts incomplete ($(ls /tmp/fa3parts | tr '\n' ' ')): no flash_ops" >&2
  fi
fi
ls "$ROOT/impl"
echo "ddtree site ready: . $ROOT/env.sh (or . $ROOT/impl/<name>/env.sh after it)"
