#!/usr/bin/env bash
# The e2e tier on a GPU host whose SGLang release comes from the carry of scripts/build-ddtree-carry.sh (with
# sglang-0.5.23 among its DDTREE_IMPLS; SGLANG_RELEASE names another), set up by scripts/ddtree-device-setup.sh (on a
# host with network: pip install the release and its pins), from the repo root:   bash scripts/e2e-device.sh "$OUT"
# Writes into OUT (5 files): e2e.jsonl (results, tier e2e), e2e-pytest.log, e2e.md and e2e.html (report),
# e2e-captures.tar.gz (server logs, launch commands, per-phase captures: unpack into
# tests/e2e/fixtures/captures/ to make them parsing fixtures). pytest is stopped at E2E_BUDGET_S seconds
# (default 540) so the report and the tarball still get written inside a 10-minute call. E2E_ATTENTION: the
# attention backends (default all four: SGLang's own choice, triton, flashinfer, fa3; docs/e2e.md).
# For a DDTree build of SGLang (DDTREE, and DFLASH with flashinfer) use scripts/build-ddtree-carry.sh,
# scripts/ddtree-device-setup.sh and scripts/e2e-ddtree-device.sh instead (docs/e2e.md).
set -uo pipefail
OUT=${1:?usage: bash scripts/e2e-device.sh OUT_DIR}
WORK=${E2E_WORK:-/tmp/e2e}
RELEASE_ENV=/tmp/ddt/impl/${SGLANG_RELEASE:-sglang-0.5.23}/env.sh
# shellcheck disable=SC1090
[ -f "$RELEASE_ENV" ] && . /tmp/ddt/env.sh && . "$RELEASE_ENV"
export SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 HF_HUB_OFFLINE=1
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/e2e-pytest.log" 2>&1
timeout -s TERM "${E2E_BUDGET_S:-540}" python3 -m pytest tests/e2e/test_serve.py tests/e2e/test_checkpoints.py \
  -p no:cacheprovider -rA --ddtree-static=off --ddtree-e2e-attention "${E2E_ATTENTION:-default,triton,flashinfer,fa3}" \
  --ddtree-results "$OUT/e2e.jsonl" --ddtree-e2e-dir "$WORK" \
  >> "$OUT/e2e-pytest.log" 2>&1
echo "pytest exit: $?" >> "$OUT/e2e-pytest.log"
python3 -m ddtree_compat report "$OUT/e2e.jsonl" -o "$OUT/e2e.md" --html "$OUT/e2e.html" >> "$OUT/e2e-pytest.log" 2>&1 \
  || echo "report not rendered here (render it from e2e.jsonl on the CPU machine)" >> "$OUT/e2e-pytest.log"
tar czf "$OUT/e2e-captures.tar.gz" -C "$WORK" --exclude=./checkpoints . 2>> "$OUT/e2e-pytest.log"
ls -la "$OUT" >> "$OUT/e2e-pytest.log"
