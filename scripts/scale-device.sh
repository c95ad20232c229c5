#!/usr/bin/env bash
# The deployment-shape cells (`--profile scale`) and their envelope on a lent GPU host without network
# (docs/lent-gpu.md), from the repo root, after scripts/build-ddtree-carry.sh's parts (with sglang-0.5.23) are
# staged and set up (scripts/ddtree-device-setup.sh), with .carry/samp/ (scripts/build-sampling-carry.sh) carried:
#     bash scripts/scale-device.sh OUT
# Environment: SELECT (a -k expression: only those cells, no KV sweep), WORKERS (default 3), SCALE_IMPLS (the DDTree
# trees' kernel modules, default every one carried; empty: the release alone), VOCAB, STEP_S, COMMIT_S,
# ENVELOPE_S, PROBES.
# SGLang 0.5.23's kernels and each DDTree tree's (their kernel modules from .carry/samp/impls.tar.gz) at every derived
# boundary, three xdist workers (a cell takes up to ~34 GiB, each worker's arena reuses its own), then `envelope` (the
# bisection, each probe a replay in its own process) and the report. Writes OUT/scale.tar.gz (the results, the
# report, the envelope picture, the logs) and OUT/steps.txt.
set -uo pipefail
OUT=${1:?usage: bash scripts/scale-device.sh OUT}
W=/tmp/scale
# a second run on a warm machine: the earlier run's folder is kept beside, never resumed or replaced
[ -e "$W" ] && mv "$W" "$W.$(date +%s)"
mkdir -p "$OUT" "$W"
# shellcheck source=scripts/samp-carry-env.sh
. scripts/samp-carry-env.sh "$W/install.log"
export PYTHONPATH=$FI:$SITE:$WHL DDTREE_IMPLS=${SCALE_IMPLS-$IMPLS}
start=$SECONDS
# the KV-cache kernels import SGLang's memory pool, and FlashInfer's verify attention is FlashInfer itself: both need
# the host's flashinfer (not the headers-only package the sampling JIT reads, which shadows it in the first sweep), so
# their cells run in a second sweep appended to the same file, without it
COMMIT="assign_req_to_token or move_kv or flashinfer"
timeout -s INT "${STEP_S:-330}" python3 -m ddtree_compat sweep --tier device --profile scale -n "${WORKERS:-3}" --timeout 200 \
  --tests tests/kernels/test_scale.py --out-dir "$W" --name scale ${VOCAB:+--vocab "$VOCAB"} -- --ddtree-static=off \
  -k "${SELECT:-not ($COMMIT)}" > "$W/scale.log" 2>&1
echo "sweep exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
start=$SECONDS
[ -n "${SELECT:-}" ] || PYTHONPATH=$SITE:$WHL timeout -s INT "${COMMIT_S:-150}" python3 -m ddtree_compat sweep --tier device \
  --profile scale -n "${WORKERS:-3}" --timeout 200 --tests tests/kernels/test_scale.py --out-dir "$W" --name scale --append \
  -- --ddtree-static=off -k "$COMMIT" > "$W/scale-kv.log" 2>&1
echo "KV sweep exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
start=$SECONDS
timeout -s INT "${ENVELOPE_S:-150}" python3 -m ddtree_compat envelope "$W/scale.jsonl" --cases-dir "$W/probes" \
  --max-probes "${PROBES:-40}" --timeout 120 > "$W/envelope.txt" 2>&1
echo "envelope exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
python3 -m ddtree_compat report "$W/scale.jsonl" -o "$W/scale.md" --html "$W/scale.html" > "$W/report.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv >> "$OUT/steps.txt" 2>&1
tar -C /tmp -czf "$OUT/scale.tar.gz" scale
tail -3 "$W/scale.log" >> "$OUT/steps.txt"; tail -40 "$W/envelope.txt" >> "$OUT/steps.txt"
cat "$OUT/steps.txt"
