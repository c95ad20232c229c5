#!/usr/bin/env bash
# Build the carry of sgl-kernel's FA3 library (flash_ops.abi3.so, 1.12 GB; scripts/build-ddtree-carry.sh leaves it
# out), for the fa3 cells (verify attention on FA3, the e2e servers on SGLang's own choice on Hopper, which is fa3).
# Run on a machine with pip access, from the project root:
#     bash scripts/build-fa3-carry.sh [OUT_DIR]       # default .carry: OUT/fa3-1 .. OUT/fa3-N
# The library travels xz'd (-3: ~100 MB from 1.12 GB, ~2 min on 2 cores) in parts of PART_BYTES (default 38000000:
# each part plus the tracked tree stays under a call's 64 MiB). On the device, carry each fa3-K folder in
# back-to-back calls with the DDTree carry's parts (`bash .carry/fa3-K/stage.sh` copies its part into /tmp/fa3parts);
# scripts/ddtree-device-setup.sh puts the library next to the DDTree carry's sgl_kernel when /tmp/fa3parts holds
# every part (FA3_PARTS, written into the last folder).
set -euo pipefail
OUT=${1:-.carry}
PART_BYTES=${PART_BYTES:-38000000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 \
  -d "$WORK" sglang-kernel==0.4.5
unzip -q -o "$WORK"/sglang_kernel-*.whl 'sgl_kernel/flash_ops.abi3.so' -d "$WORK"
xz -3 -T2 -c "$WORK/sgl_kernel/flash_ops.abi3.so" > "$WORK/flash_ops.xz"
( cd "$WORK" && split -b "$PART_BYTES" -d -a 2 flash_ops.xz part_ )
rm -rf "$OUT"/fa3-*
k=0
for p in "$WORK"/part_*; do
  k=$((k + 1)); mkdir -p "$OUT/fa3-$k"; mv "$p" "$OUT/fa3-$k/"
  cat > "$OUT/fa3-$k/stage.sh" <<'STAGE'
set -e; mkdir -p /tmp/fa3parts; cp "$(dirname "$0")"/part_* /tmp/fa3parts/; cp "$(dirname "$0")"/FA3_* /tmp/fa3parts/ 2>/dev/null || true; echo "fa3 staged: $(ls /tmp/fa3parts | tr '\n' ' ')"
STAGE
done
echo "$k $(sha256sum "$WORK/flash_ops.xz" | cut -d' ' -f1)" > "$OUT/fa3-$k/FA3_PARTS"
du -sh "$OUT"/fa3-*
echo "fa3 carry in $k back-to-back calls"
