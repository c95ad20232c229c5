#!/usr/bin/env bash
# The sampling verify family on a lent GPU host without network (docs/lent-gpu.md), from the repo root, after
# scripts/build-ddtree-carry.sh's parts (with sglang-0.5.23) are staged and set up (scripts/ddtree-device-setup.sh):
#     bash scripts/sampling-device.sh OUT [RUNS]
# Needs .carry/samp/ (made by `bash scripts/build-sampling-carry.sh`):
#   fihdr.tar.gz  a headers-only `flashinfer` package (flashinfer-python 0.7.2's data/include, cuRAND's headers in
#                 data/csrc, the empty folders SGLang's JIT checks for): SGLang 0.5.23's JIT sampling kernel reads
#                 FlashInfer's headers, and the host's flashinfer 0.6.14 lacks them; put first on PYTHONPATH for
#                 this sweep only (its attention is not under test here);
#   impls.tar.gz  each DDTree tree's DDTree modules only (the kernel module, ddtree_utils, dflash_utils), with their
#                 ddtree-impl.json: their samplers load from those files;
#   covertable-*.whl  the covering arrays' package (the exact grids are pairwise), not in the host's site.
# Runs the sampling family on the device tier RUNS times (default 2: the distribution cells' verdicts must repeat),
# then `diff` of the first and the last run. Writes OUT/run<i>.{jsonl,md,log} and OUT/diff.txt.
set -uo pipefail
OUT=${1:?usage: bash scripts/sampling-device.sh OUT [RUNS]}
RUNS=${2:-2}
mkdir -p "$OUT"
# shellcheck source=scripts/samp-carry-env.sh
. scripts/samp-carry-env.sh "$OUT/install.log"
for i in $(seq 1 "$RUNS"); do
  start=$SECONDS
  PYTHONPATH=$FI:$SITE:$WHL DDTREE_IMPLS=$IMPLS timeout -s INT "${STEP_S:-280}" python3 -m ddtree_compat sweep \
    --tier device --timeout 120 --tests tests/kernels/test_sampling.py --out-dir "$OUT" --name "run$i" \
    -- --ddtree-static=off > "$OUT/run$i.log" 2>&1
  echo "run$i exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
done
[ "$RUNS" -gt 1 ] && PYTHONPATH=$SITE python3 -m ddtree_compat diff "$OUT/run1.jsonl" "$OUT/run$RUNS.jsonl" > "$OUT/diff.txt" 2>&1
echo "diff exit $?" >> "$OUT/steps.txt"
cat "$OUT/steps.txt"
