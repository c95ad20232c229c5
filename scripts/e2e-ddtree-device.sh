#!/usr/bin/env bash
# The e2e tier against DDTree builds of SGLang on a GPU host, after scripts/build-ddtree-carry.sh's parts are
# staged and scripts/ddtree-device-setup.sh ran (/tmp/ddt). From the repo root:
#     bash scripts/e2e-ddtree-device.sh OUT_DIR
# One pytest session per implementation, all at once (each its own servers, results and captures):
#   a: rancy-ddtree-v2, profile `ddtree` (the budget sweep, DFLASH, prune), DDTREE_E2E_PARALLEL_A servers at once
#   b: dbguo-ddtree-dev, profile `dflash-ddtree` (DDTree inside the DFlash worker)
#   c: rancy-ddtree,     profile `ddtree-smoke`
#   d: rancy-ddtree-v2, profile `ddtree-boundary` (verify width B + 1 against the block size)
#   p: rancy-ddtree-v2, profile `ddtree-smoke` on every attention backend (`default` = SGLang's own choice,
#      triton, flashinfer, fa3; one that cannot serve is a skip saying why), poison target, padded graph batches
#   s: rancy-ddtree-v2, profile `sampling` (requests at temperature 1, top-k 71, top-p 0.5; the planted skew
#      --speculative-accept-threshold-single=0 must be recorded `wrong`), on triton
#   x: rancy-ddtree-v2, profile `scale` (deployment concurrency: up to 512 requests at once, the tiny target padded
#      to the 248320 vocabulary; DDTREE B 16 and 64, DFLASH block 16; greedy and top-p 0.5), on SGLang's own choice
#      (fa3 on Hopper: stage scripts/build-fa3-carry.sh's parts before set-up, else a skip saying flash_ops is missing)
#      and triton
#   y: rancy-ddtree, profile `scale`, on triton (its pinned sgl-kernel 0.4.3 has no FA3 library)
#   z: dbguo-ddtree-dev, profile `scale`, on triton (its DDTree inside the DFlash worker; the DDTREE cells skip there)
#   h: rancy-ddtree-v2, profile `hybrid` (the Qwen3.5 family's class: Gated DeltaNet layers whose recurrent state
#      decides a token; DDTREE spine and branching budgets, DFLASH, EAGLE chain and tree), on triton
#   g: dbguo-ddtree-dev, profile `hybrid`, on triton (its DDTree inside the DFlash worker on the hybrid target)
#   k: rancy-ddtree, profile `hybrid`, on triton (stage ddt-legacy: its server imports need sglang-kernel 0.4.3)
#   r: sglang-0.5.23 (a release in the carry: DDTREE_IMPLS="... sglang-0.5.23"), profile `hybrid`, on triton (its
#      EAGLE and DFLASH cells; DDTREE skips, the release has none)
#   n: sglang-0.5.23, the hybrid target's negative control: tests/e2e/planted/ first on PYTHONPATH with
#      DDTREE_PLANT=gdn-chain runs the Gated DeltaNet verify as one chain; `-k eagle-k2` on triton: must read `wrong`
#   m: rancy-ddtree-v2, the mask's negative control: tests/e2e/planted/ first on PYTHONPATH flips one
#      visibility bit in compile_ddtree_tree; `-k ddtree-b16` on triton; its cells must be recorded `wrong`
# Attention backends per session: E2E_ATTENTION_<S> (a, b, c, d, s, g, h, k, m, n, r default `triton`; p all four;
# x default and triton).
# Servers at once per session: DDTREE_E2E_PARALLEL_<S> (default below). Each session takes a -k expression from E2E_K_<S> (E2E_K_X="c512", ...; default: every cell, m: ddtree-b16, n: eagle-k2).
# (E2E_SESSIONS="a b c" by default picks them). Each session is stopped at E2E_BUDGET_S seconds (default 420) so the
# tarballs still get written inside a 10-minute call. Writes into OUT: <s>.jsonl, <s>-pytest.log and
# <s>-captures.tar.gz per session (server logs, launch commands, per-phase captures; no checkpoints).
set -uo pipefail
OUT=${1:?usage: bash scripts/e2e-ddtree-device.sh OUT_DIR}
ROOT=/tmp/ddt
BUDGET=${E2E_BUDGET_S:-420}
mkdir -p "$OUT"
. "$ROOT/env.sh"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
export DDTREE_E2E_MEM_FRACTION=${DDTREE_E2E_MEM_FRACTION:-0.5}  # a cap (--max-total-tokens) bounds the pool
declare -A IMPL=([a]=rancy-ddtree-v2 [b]=dbguo-ddtree-dev [c]=rancy-ddtree [d]=rancy-ddtree-v2 [p]=rancy-ddtree-v2
                 [m]=rancy-ddtree-v2 [s]=rancy-ddtree-v2 [x]=rancy-ddtree-v2 [y]=rancy-ddtree
                 [z]=dbguo-ddtree-dev [h]=rancy-ddtree-v2 [r]=sglang-0.5.23
                 [g]=dbguo-ddtree-dev [n]=sglang-0.5.23 [k]=rancy-ddtree)
declare -A PROFILE=([a]=ddtree [b]=dflash-ddtree [c]=ddtree-smoke [d]=ddtree-boundary [p]=ddtree-smoke [m]=ddtree-smoke
                    [s]=sampling [x]=scale [y]=scale [z]=scale [h]=hybrid [r]=hybrid [g]=hybrid [n]=hybrid
                    [k]=hybrid)
declare -A PAR=([a]=13 [b]=3 [c]=3 [d]=5 [p]=8 [m]=2 [s]=13 [x]=2 [y]=2 [z]=2 [h]=10 [r]=3 [g]=6 [n]=1 [k]=6)
declare -A ATTN=([a]=${E2E_ATTENTION_A:-triton} [b]=${E2E_ATTENTION_B:-triton} [c]=${E2E_ATTENTION_C:-triton}
                 [d]=${E2E_ATTENTION_D:-triton} [p]=${E2E_ATTENTION_P:-default,triton,flashinfer,fa3}
                 [m]=${E2E_ATTENTION_M:-triton} [s]=${E2E_ATTENTION_S:-triton} [x]=${E2E_ATTENTION_X:-default,triton}
                 [y]=${E2E_ATTENTION_Y:-triton} [z]=${E2E_ATTENTION_Z:-triton} [h]=${E2E_ATTENTION_H:-triton}
                 [r]=${E2E_ATTENTION_R:-triton} [g]=${E2E_ATTENTION_G:-triton}
                 [n]=${E2E_ATTENTION_N:-triton} [k]=${E2E_ATTENTION_K:-triton})
declare -A SELECT=([m]="ddtree-b16" [n]="eagle-k2")
pids=()
read -r -a sessions <<< "${E2E_SESSIONS:-a b c}"
# sessions run at once on the one GPU: a server out of memory beside the others is the suite's error (docs/e2e.md)
export DDTREE_E2E_GPU_SESSIONS=${#sessions[@]}
for s in "${sessions[@]}"; do
  impl=${IMPL[$s]}
  [ -f "$ROOT/impl/$impl/env.sh" ] || { echo "no $impl in $ROOT/impl" >> "$OUT/setup.log"; continue; }
  (
    . "$ROOT/impl/$impl/env.sh"
    pvar="DDTREE_E2E_PARALLEL_${s^^}"
    export DDTREE_E2E_PROFILE=${PROFILE[$s]} DDTREE_E2E_PARALLEL=${!pvar:-${PAR[$s]}}
    sel=()
    kvar="E2E_K_${s^^}"
    k=${!kvar:-${SELECT[$s]:-}}
    [ -n "$k" ] && sel=(-k "$k")
    if [ "$s" = m ]; then
      export PYTHONPATH="$PWD/tests/e2e/planted:$PYTHONPATH" DDTREE_PLANT=mask DDTREE_PLANTED_LOG="$OUT/m-planted.log"
    fi
    if [ "$s" = n ]; then
      export PYTHONPATH="$PWD/tests/e2e/planted:$PYTHONPATH" DDTREE_PLANT=gdn-chain DDTREE_PLANTED_LOG="$OUT/n-planted.log"
    fi
    echo "session $s: $DDTREE_E2E_IMPL, profile $DDTREE_E2E_PROFILE, attention ${ATTN[$s]}, $DDTREE_E2E_PARALLEL servers at once ${sel[*]}" > "$OUT/$s-pytest.log"
    timeout -s TERM "$BUDGET" python3 -m pytest tests/e2e/test_serve.py -p no:cacheprovider -rA --ddtree-static=off \
      --ddtree-e2e-attention "${ATTN[$s]}" "${sel[@]}" \
      --ddtree-results "$OUT/$s.jsonl" --ddtree-e2e-dir "/tmp/e2e-$s" >> "$OUT/$s-pytest.log" 2>&1
    echo "pytest exit: $?" >> "$OUT/$s-pytest.log"
    tar czf "$OUT/$s-captures.tar.gz" -C "/tmp/e2e-$s" --exclude=./checkpoints . 2>> "$OUT/$s-pytest.log"
  ) &
  pids+=($!)
  sleep 2
done
for p in "${pids[@]}"; do wait "$p"; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$OUT/setup.log" 2>&1
ls -la "$OUT" >> "$OUT/setup.log"
