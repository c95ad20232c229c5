#!/usr/bin/env bash
# The linear-attention family's cells on a lent GPU host without network (device tier, the device profile: the
# Qwen3.5 / 3.6 and Qwen3-Next layer geometries), against released SGLang's kernels. From the repo root, with the
# carry of scripts/build-linear-carry.sh in .lincarry/ (carried: the project's tree travels by itself; with
# .lincarry/impls/, the DDTree trees' tarballs, each tree's own copies of the kernels get a column):
#   bash scripts/linear-device.sh OUT [pytest args for the sweep...]
# Writes OUT/linear-device.{jsonl,md,html,png} and OUT/linear-device.log; the sweep's exit status in OUT/steps.txt.
set -uo pipefail
OUT=${1:?usage: bash scripts/linear-device.sh OUT [pytest args]}; shift
mkdir -p "$OUT" /tmp/lin-site
if [ ! -d /tmp/lin-site/sglang ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/lin-site .lincarry/*.whl > "$OUT/install.log" 2>&1
  tar -C /tmp/lin-site -xJf .lincarry/sglang-*.tar.xz
fi
bash scripts/device-bytecode.sh ddtree_compat tests benchmarks  # the lent host writes no bytecode
python3 -m pip install -q --no-deps --no-build-isolation -e . >> "$OUT/install.log" 2>&1
export PYTHONPATH=/tmp/lin-site SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 PYTHONUNBUFFERED=1
if [ -d .lincarry/impls ]; then  # the DDTree trees' own copies of the kernels: a column each
  DDTREE_IMPLS=$(bash scripts/unpack-ddtree-impls.sh .lincarry/impls /tmp/impls)
  export DDTREE_IMPLS
fi
start=$SECONDS
timeout -s INT "${STEP_S:-420}" python3 -m ddtree_compat sweep --tier device --timeout 120 --out-dir "$OUT" \
  --name linear-device --tests tests/kernels/test_linear_attention.py -- --ddtree-static=off "$@" \
  > "$OUT/linear-device.log" 2>&1
echo "linear-device exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
