#!/usr/bin/env bash
# The kernel tiers on a lent GPU host without network (docs/lent-gpu.md), from the repo
# root, after the carry of scripts/build-ddtree-carry.sh (with sglang-0.5.23 among its DDTREE_IMPLS: the release the
# SGLang cells run against; SGLANG_RELEASE names another) is staged and set up (scripts/ddtree-device-setup.sh),
# with .carry/samp/ (scripts/build-sampling-carry.sh: covertable's wheel, which every step needs) and the DDTree
# tarballs / stripped sglang wheels carried (on a host with network: pip install the release):
#   bash scripts/device-kernels.sh OUT STEP...
#   STEP: ddtree | graph-replay | default | phases | containment | flashinfer | fa3 | versions VERSION...
# Writes results JSONL and reports into OUT. Each step runs the README's main job (python -m ddtree_compat
# sweep) on the device tier; its exit status is kept in OUT/steps.txt.
set -uo pipefail
OUT=${1:?usage: bash scripts/device-kernels.sh OUT STEP...}; shift
mkdir -p "$OUT"
bash scripts/device-bytecode.sh ddtree_compat tests benchmarks  # the lent host writes no bytecode
RELEASE_ENV=/tmp/ddt/impl/${SGLANG_RELEASE:-sglang-0.5.23}/env.sh
# shellcheck disable=SC1090
SITE=$( [ -f "$RELEASE_ENV" ] && . "$RELEASE_ENV" && echo "$PYTHONPATH" )
# covertable (the covering grids' pairwise arrays; the sampling and DDTree grids are built with it at collection) is
# not in the lent host's site: its wheel travels in .carry/samp/ (scripts/build-sampling-carry.sh), installed once
# into /tmp/whl-site, which every step has on PYTHONPATH
if [ ! -d /tmp/whl-site/covertable ]; then
  wheel=$(ls .carry/samp/covertable-*.whl 2>/dev/null | head -1)
  if [ -n "$wheel" ]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/whl-site "$wheel"
  else
    echo "no .carry/samp/covertable-*.whl carried: the sampling and DDTree test files fail to collect" | tee -a "$OUT/steps.txt"
  fi
fi
SITE=${SITE:+$SITE:}/tmp/whl-site
export SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1
NO_ATTENTION="not verify_attention"
# (the default and phases steps: the scale slice's attention cells run with the other verify-attention cells, in the
# flashinfer and fa3 steps, where FlashInfer's JIT build and FA3's kernels are paid for anyway)
sweep() {  # NAME PYTHONPATH ARGS...
  local name=$1 path=$2; shift 2
  local start=$SECONDS
  PYTHONPATH=$path timeout -s INT "${STEP_S:-280}" python3 -m ddtree_compat sweep --tier device --timeout 60 \
    --out-dir "$OUT" --name "$name" "$@" \
    > "$OUT/$name.log" 2>&1
  echo "$name exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
}
while [ $# -gt 0 ]; do
  case "$1" in
    ddtree)  # every DDTree kernel of every implementation over the default grid, and the round in one CUDA graph
      mkdir -p /tmp/impls
      IMPLS=$(bash scripts/unpack-ddtree-impls.sh .carry/impls /tmp/impls)
      DDTREE_IMPLS=$IMPLS sweep ddtree "$SITE" --tests tests/kernels/test_ddtree.py \
        -- --ddtree-static=off ;;
    default)  # the default kernel sweep (verify + commit + graphs + properties + sampling + the scale slice), as on the
      # H200 on 2026-11-30: verify attention (its slice cells too) is the flashinfer / fa3 steps', the DDTree kernels the ddtree step's
      sweep default "$SITE" -- --ddtree-static=off --ignore=tests/kernels/test_verify_attention.py \
        --ignore=tests/kernels/test_ddtree.py -k "$NO_ATTENTION" ;;
    phases)  # the default sweep's wall time phase by phase (benchmarks/sweep_phases.py), for this tree and, before it, each tree carried
      # as .carry/tree-LABEL.tar.gz (a git archive: the device copy has no history), unpacked into /tmp/tree-LABEL
      repos=()
      for tarball in .carry/tree-*.tar.gz; do
        [ -f "$tarball" ] || continue
        label=$(basename "$tarball" .tar.gz); label=${label#tree-}
        if [ ! -d "/tmp/tree-$label" ]; then  # with its bytecode, as this tree's (the host writes none)
          mkdir -p "/tmp/tree-$label" && tar -C "/tmp/tree-$label" -xzf "$tarball"
          (cd "/tmp/tree-$label" && bash "$OLDPWD/scripts/device-bytecode.sh" ddtree_compat tests benchmarks)
        fi
        repos+=(--repo "$label=/tmp/tree-$label")
      done
      repos+=(--repo after=.)
      start=$SECONDS tag=${PHASES_TAG:-}
      # shellcheck disable=SC2086
      PYTHONPATH=$SITE timeout -s INT "${STEP_S:-480}" python3 benchmarks/sweep_phases.py "${repos[@]}" ${PHASES_FLAGS:-} \
        --work-dir "/tmp/phases$tag" --out "$OUT/phases$tag.md" -- --tier device --timeout 60 -- --ddtree-static=off \
        --ignore=tests/kernels/test_verify_attention.py --ignore=tests/kernels/test_ddtree.py -k "$NO_ATTENTION" \
        ${PHASES_EXTRA:-} \
        > "$OUT/phases$tag.log" 2>&1
      echo "phases$tag exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt"
      # the runs' data in one file ($OUT brings back 8 files at most): probe lines, timestamped logs, results
      tar -C "/tmp/phases$tag" -czf "$OUT/phases$tag-data.tar.gz" --exclude=module --exclude='*.html' --exclude='*.png' . ;;
    containment)  # the sweep's containment (an xdist worker, --timeout) against one process: every verify cell, warm
      start=$SECONDS
      PYTHONPATH=$SITE timeout -s INT "${STEP_S:-400}" python3 benchmarks/suite_cost.py --tier device --skip-sweep \
        --skip-cpu-tiers --budgets all --replays 0 --out "$OUT/containment.md" > "$OUT/containment.log" 2>&1
      echo "containment exit $? in $((SECONDS - start)) s" >> "$OUT/steps.txt" ;;
    flashinfer)  # FlashInfer's verify attention, eager and in a CUDA graph, over the attention device profile,
      # with the DDTree carry's flashinfer (scripts/build-ddtree-carry.sh, then scripts/ddtree-device-setup.sh);
      # the first cell of each dtype x head_dim waits for FlashInfer's JIT build (under a minute each on the H200)
      # shellcheck disable=SC1091
      . /tmp/ddt/env.sh
      FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a} STEP_S=${STEP_S:-560} \
        sweep flashinfer "$PYTHONPATH:/tmp/whl-site" --backend flashinfer --timeout 400 \
        --tests tests/kernels/test_verify_attention.py -- --ddtree-static=off --ddtree-attention-profile device \
        tests/kernels/test_scale.py ;;
    fa3)  # FA3 verify attention through a DDTree implementation's FA metadata (rancy-ddtree-v2), over the attention
      # device profile; needs sgl-kernel's flash_ops (stripped from the carry: scripts/build-fa3-carry.sh's parts,
      # staged before scripts/ddtree-device-setup.sh, which puts it next to the DDTree carry's sgl_kernel)
      # shellcheck disable=SC1091
      . /tmp/ddt/env.sh
      [ -f /tmp/ddt/site/sgl_kernel/flash_ops.abi3.so ] ||
        echo "no flash_ops.abi3.so: every fa3 cell a skip (stage scripts/build-fa3-carry.sh's parts before set-up)"
      STEP_S=${STEP_S:-300} DDTREE_IMPLS=/tmp/ddt/impl/rancy-ddtree-v2 \
        sweep fa3 "$PYTHONPATH:/tmp/whl-site" --backend ddtree-impl:/tmp/ddt/impl/rancy-ddtree-v2 --timeout 200 \
        --tests tests/kernels/test_verify_attention.py -- --ddtree-static=off --ddtree-attention-profile device \
        tests/kernels/test_scale.py -k verify_attention ;;
    graph-replay)  # each CUDA-graph fault of the ddtree step's results (kernel@graph) replayed as its pytest cell
      # (a graph round has no record: its replay line is the node id); the replayed outcome goes to steps.txt
      mkdir -p /tmp/impls
      IMPLS=$(bash scripts/unpack-ddtree-impls.sh .carry/impls /tmp/impls)
      python3 - "$OUT/ddtree.jsonl" > "$OUT/graph-faults.txt" <<'PY'
import json, sys
seen = set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    graph_fault = r.get("kind") == "result" and r["outcome"] == "fault" and r["kernel"].endswith("@graph")
    if graph_fault and r["kernel"] not in seen:
        seen.add(r["kernel"])
        print(r["nodeid"])
PY
      while read -r nodeid; do
        DDTREE_IMPLS=$IMPLS PYTHONPATH=$SITE timeout 120 python3 -m pytest "$nodeid" -q \
          -p no:cacheprovider --ddtree-tier=device --ddtree-static=off --ddtree-results="$OUT/graph-replay.jsonl" \
          >> "$OUT/graph-replay.log" 2>&1
        echo "graph-replay exit $? $nodeid" >> "$OUT/steps.txt"
      done < "$OUT/graph-faults.txt" ;;
    versions)  # the verify and commit kernels of each release at the field's budgets
      shift
      for v in "$@"; do
        mkdir -p "/tmp/sgl-$v"
        whl=$(ls .carry/wheels-*/s-sglang-"$v"-*.whl /tmp/wheels/s-sglang-"$v"-*.whl 2>/dev/null | head -1)
        [ -n "$whl" ] && [ ! -d "/tmp/sgl-$v/sglang" ] && python3 -m zipfile -e "$whl" "/tmp/sgl-$v"
        sweep "sglang-$v" "/tmp/sgl-$v:$SITE" --tests tests/kernels/test_verify.py -- --ddtree-static=off \
          tests/kernels/test_commit.py -k "b8- or b12- or b15- or b16- or b32- or b64-"
      done
      break ;;
  esac
  shift
done
ls -la "$OUT" >> "$OUT/steps.txt"
