#!/usr/bin/env bash
# Preflight on a lent GPU host without network (docs/lent-gpu.md), for the field's serving configuration against the
# DDTree trees of the carry. From the repo root, after scripts/build-ddtree-carry.sh's parts are staged and set up
# (scripts/ddtree-device-setup.sh), with .carry/samp/ (scripts/build-sampling-carry.sh: covertable's wheel) carried:
#     bash scripts/preflight-device.sh OUT TREE:BUDGET[:dflash] ...
# Each run is `python -m ddtree_compat preflight` with DDTREE_IMPLS set to the tree and the field's launch flags:
#     --model-path tests/unit/fixtures/models/qwen3.6-27b --speculative-algorithm DDTREE
#     --speculative-ddtree-budget BUDGET --speculative-ddtree-block-size 16 --attention-backend flashinfer
#     --max-running-requests 256
# `:dflash` serves DDTree inside the DFlash worker instead (--speculative-algorithm DFLASH
# --speculative-dflash-enable-ddtree --speculative-num-draft-tokens BUDGET+1: dbguo-ddtree-dev's form, whose budget is
# its block size less one, so only budget 15 is the field's block 16). The trees
# built on SGLang of June 2026 (rancy-ddtree, dbguo-ddtree-dev) serve a hybrid model only with
# --disable-radix-cache, which is added for them. Environment: PF_FLAGS (more launch flags for every run),
# PF_SAMPLING (preflight's --sampling values, space-separated; default preflight's: greedy and temperature=1),
# PF_S (seconds per run, default 420), DDTREE_PREFLIGHT_E2E_S (the replica's share, default 240 here).
# Writes OUT/<tree>-b<budget>[-dflash].tar.gz (the results, report, logs, replica captures) and OUT/steps.txt with
# each run's screen.
set -uo pipefail
OUT=${1:?usage: bash scripts/preflight-device.sh OUT TREE:BUDGET[:dflash] ...}
shift
ROOT=/tmp/ddt
mkdir -p "$OUT"
# shellcheck source=scripts/samp-carry-env.sh
. scripts/samp-carry-env.sh "$OUT/install.log"
export DDTREE_PREFLIGHT_E2E_S=${DDTREE_PREFLIGHT_E2E_S:-240}
sampling=()
for s in ${PF_SAMPLING:-}; do sampling+=(--sampling "$s"); done
for run in "$@"; do
  IFS=: read -r tree budget form <<< "$run"
  [ -f "$ROOT/impl/$tree/env.sh" ] || { echo "$run: no $tree in $ROOT/impl" | tee -a "$OUT/steps.txt"; continue; }
  flags=(--model-path tests/unit/fixtures/models/qwen3.6-27b --attention-backend flashinfer --max-running-requests 256)
  if [ "$form" = dflash ]; then
    flags+=(--speculative-algorithm DFLASH --speculative-dflash-enable-ddtree
            --speculative-num-draft-tokens $((budget + 1)))
  else
    flags+=(--speculative-algorithm DDTREE --speculative-ddtree-budget "$budget" --speculative-ddtree-block-size 16)
  fi
  case "$tree" in rancy-ddtree|dbguo-ddtree-dev) flags+=(--disable-radix-cache) ;; esac
  read -r -a more <<< "${PF_FLAGS:-}"
  name=$tree-b$budget${form:+-$form}
  w=/tmp/pf/$name
  [ -e "$w" ] && mv "$w" "$w.$(date +%s)"  # a second run on a warm machine keeps the first beside
  mkdir -p "$w"
  start=$SECONDS
  (
    . "$ROOT/env.sh"
    . "$ROOT/impl/$tree/env.sh"
    export PYTHONPATH=$PYTHONPATH:$WHL DDTREE_IMPLS=$ROOT/impl/$tree
    timeout -s INT "${PF_S:-420}" python3 -m ddtree_compat preflight --out-dir "$w" "${sampling[@]}" \
      -- "${flags[@]}" "${more[@]}" > "$w/screen.txt" 2>&1
    echo "$run: preflight exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
  )
  printf 'launch: %s\n' "${flags[*]} ${more[*]}" >> "$w/screen.txt"
  cat "$w/screen.txt" >> "$OUT/steps.txt"
  tar -C /tmp/pf -czf "$OUT/$name.tar.gz" --exclude='*/checkpoints' "$name"
done
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> "$OUT/steps.txt" 2>&1
cat "$OUT/steps.txt"
