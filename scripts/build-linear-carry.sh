#!/usr/bin/env bash
# The carry of scripts/linear-device.sh, built on a machine with pip access and SGLang installed (scripts/setup.sh),
# from the repo root: bash scripts/build-linear-carry.sh (writes .lincarry/; add /.lincarry/ to .git/info/exclude).
# It holds the installed sglang package as a tarball (its kernels and the modules they import; multimodal_gen, test,
# benchmark and bytecode left out: ~8 MB) and Python 3.12 wheels of the few modules SGLang's kernel modules import
# that the lent host's image lacks (~7 MB); with DDTREE_IMPLS_DIR (the folder of the DDTree trees' tarballs), those
# tarballs in impls/ (~11 MB).
set -euo pipefail
OUT=.lincarry
rm -rf "$OUT" && mkdir -p "$OUT"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$OUT" \
  orjson==3.13.0 pybase64==1.5.1 msgspec==0.23.0 pyzmq==27.3.0 starlette==1.10.0 ipython==9.18.1 traitlets==5.16.1 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 annotated-doc==0.0.7 \
  typing-extensions==4.16.0 apache-tvm-ffi==0.1.11 covertable==3.2.0 dill==0.4.1 \
  compressed-tensors==0.18.0 loguru==0.7.3
SITE=$(python3 -c "import os, sglang; print(os.path.dirname(os.path.dirname(sglang.__file__)))")
VERSION=$(python3 -c "import sglang; print(sglang.__version__)")
tar -C "$SITE" -cJf "$OUT/sglang-$VERSION.tar.xz" --exclude=sglang/multimodal_gen --exclude=sglang/test \
  --exclude=__pycache__ --exclude=sglang/benchmark --exclude='*.so' sglang "sglang-$VERSION.dist-info"
if [ -n "${DDTREE_IMPLS_DIR:-}" ]; then
  mkdir -p "$OUT/impls" && cp "$DDTREE_IMPLS_DIR"/*.tar.xz "$OUT/impls/"
fi
du -sh "$OUT"
