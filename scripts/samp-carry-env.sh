# Sourced by scripts/sampling-device.sh and scripts/scale-device.sh (from the repo root, after the DDTree carry is set
# up): unpacks .carry/samp/ (scripts/build-sampling-carry.sh) under /tmp/samp, installs this checkout editable into
# the host's Python (its log: $1), and sets
#   SITE    the SGLang release's site (SGLANG_RELEASE, default sglang-0.5.23) from the DDTree carry's set-up;
#   FI      the headers-only flashinfer folder the JIT sampler reads (first on PYTHONPATH where it is needed only:
#           it shadows the host's flashinfer 0.6.14, which SGLang's memory pool and attention import);
#   WHL     covertable's wheel, installed into a folder (the host's site lacks it);
#   IMPLS   each DDTree tree's kernel modules, separated by ':' (DDTREE_IMPLS).
mkdir -p /tmp/samp/fi /tmp/samp/impls
tar -C /tmp/samp/fi -xzf .carry/samp/fihdr.tar.gz
tar -C /tmp/samp/impls -xzf .carry/samp/impls.tar.gz
[ -d /tmp/samp/whl/covertable ] || python3 -m pip install -q --no-index --no-deps --target /tmp/samp/whl .carry/samp/*.whl
RELEASE_ENV=/tmp/ddt/impl/${SGLANG_RELEASE:-sglang-0.5.23}/env.sh
# shellcheck disable=SC1090
SITE=$(. "$RELEASE_ENV" && echo "$PYTHONPATH")
FI=/tmp/samp/fi
WHL=/tmp/samp/whl
export SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "${1:-/dev/null}" 2>&1
IMPLS=$(ls -d /tmp/samp/impls/*/ | sed 's#/$##' | paste -sd:)
