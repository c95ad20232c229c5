#!/usr/bin/env bash
# Build the carry that puts DDTree builds of SGLang, and released SGLang, with their server dependencies on a GPU
# host with Python 3.12 and no network (the lent H200: torch 2.11.0+cu130). Run on a machine with pip access, from
# the project root:
#     bash scripts/build-ddtree-carry.sh [OUT_DIR]          # default .carry (add /.carry/ to .git/info/exclude)
# Environment: DDTREE_IMPLS (names to bundle, default "rancy-ddtree-v2 dbguo-ddtree-dev rancy-ddtree"): a DDTree
# tree of MANIFEST below, taken from DDTREE_IMPLS_DIR (the folder holding your copies of those trees as python/
# tarballs; needed for these names), or sglang-X.Y.Z (a release: its wheel's sglang package, from PyPI);
# PART_BYTES (default 48000000: each carried folder plus the tracked tree (~11.4 MB) must stay under 64 MiB).
#
# What it bundles:
#   site/  sglang-kernel 0.4.5 (its sm90 op library only; built against torch 2.11), nvidia-cutlass-dsl 4.8.0
#          and the small modules SGLang's server imports (versions seen working on the H200, docs/lent-gpu.md),
#          unpacked; no sglang: each tree (a DDTree tree, or a release) brings its own python/sglang.
#   whl/   flashinfer-python 0.6.14, apache-tvm-ffi 0.1.11, cuda-tile 1.7.0, nvidia-cudnn-frontend 1.32.0,
#          transformers 5.12.1, tokenizers 0.22.2, installed there with pip --no-index --no-deps --target
#          (the image's transformers 5.17.0 breaks `import sglang.launch_server` of these trees).
#   impl/  each DDTree tree's tarball (or a release's sglang package as one), and impls.tsv: name, repository,
#          branch, commit (a release: its tag), so results name the implementation by repo and commit.
#   legacy (folder ddt-legacy, ~30 MB): sglang-kernel 0.4.3 (sm90 op library only) and flashinfer-python 0.6.12,
#          the pins of the two older trees (dbguo-ddtree-dev, rancy-ddtree), which fail to import under 0.4.5
#          (`cannot import name 'fp8_blockwise_scaled_mm' from 'sgl_kernel'`, H200 2026-12-01).
# Output: OUT/ddt-1 .. OUT/ddt-N, each holding part files and stage.sh, and OUT/ddt-legacy. On the device,
# carry each folder in back-to-back device commands (the machine keeps /tmp while warm, ~30 s):
#     each but the last: bash .carry/ddt-K/stage.sh
#     the last:          bash .carry/ddt-N/stage.sh && bash scripts/ddtree-device-setup.sh && . /tmp/ddt/env.sh && ...
# DDTREE_CARRY_PARTS="main legacy" (default) builds both; "legacy" alone rebuilds only ddt-legacy.
set -euo pipefail
OUT=${1:-.carry}
IMPLS_DIR=${DDTREE_IMPLS_DIR:-}
IMPLS=${DDTREE_IMPLS:-rancy-ddtree-v2 dbguo-ddtree-dev rancy-ddtree}
PART_BYTES=${PART_BYTES:-48000000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PIP="python3 -m pip"
PLAT="--python-version 3.12 --only-binary=:all: --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64
      --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
SITE_PKGS=(
  sglang-kernel==0.4.5
  orjson==3.13.0 pybase64==1.5.1 msgspec==0.23.0 pyzmq==27.3.0
  starlette==1.10.0 fastapi==0.165.0 uvicorn==0.54.0 python-multipart==0.0.34 opentelemetry-api==1.45.2
  ipython==9.18.1 traitlets==5.16.1 compressed-tensors==0.18.0 loguru==0.7.3 gguf==0.19.0
  openai==2.8.0 distro==1.9.0 jiter==0.19.0 sniffio==1.3.1 xgrammar==0.2.7 partial-json-parser==0.2.1.1.post7
  setproctitle==1.3.8 jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1
  soundfile==0.13.1 cffi==2.1.1 dill==0.4.1
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 annotated-doc==0.0.7
  typing-extensions==4.16.0
  nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0
  nvidia-cutlass-dsl-libs-cu13==4.8.0
)
INSTALL_WHEELS=(
  flashinfer-python==0.6.14 apache-tvm-ffi==0.1.11 cuda-tile==1.7.0 nvidia-cudnn-frontend==1.32.0
  transformers==5.12.1 tokenizers==0.22.2
)
# name | tarball | repository | branch | commit   (from $IMPLS_DIR/README.md)
MANIFEST="rancy-ddtree-v2|rancy-ddtree-v2-433c58ed.tar.xz|github.com/Rancy-Wang/sglang|ddtree-v2|433c58ed70cd1dabe5a07a83da12f1513cd599ae
dbguo-ddtree-dev|dbguo-ddtree-dev-514ea1f3.tar.xz|github.com/DB-Guo/sglang-ddtree-dev|feature/ddtree-dev|514ea1f3ec39e006b2556bfed6c0c77c8fa0c531
rancy-ddtree|rancy-ddtree-398fc2c7.tar.xz|github.com/Rancy-Wang/sglang|ddtree|398fc2c7261af88b93b772ab1c9d6c4dba612745"

PARTS=${DDTREE_CARRY_PARTS:-main legacy}
LEGACY_IMPLS="dbguo-ddtree-dev rancy-ddtree"
if [[ " $PARTS " == *" legacy "* ]]; then
  mkdir -p "$WORK/legacy/dl" "$WORK/legacy/site" "$WORK/legacy/b/whl" "$OUT/ddt-legacy"
  # shellcheck disable=SC2086
  $PIP download -q --no-deps $PLAT -d "$WORK/legacy/dl" sglang-kernel==0.4.3
  # shellcheck disable=SC2086
  $PIP download -q --no-deps $PLAT -d "$WORK/legacy/b/whl" flashinfer-python==0.6.12
  unzip -q -o "$WORK"/legacy/dl/sglang_kernel-*.whl -d "$WORK/legacy/site" -x 'sgl_kernel/flash_ops.abi3.so' \
    'sgl_kernel/flashmla_ops.abi3.so' 'sgl_kernel/infllm_ops*' 'sgl_kernel/sm100/*'
  tar -C "$WORK/legacy/site" -cf - . | xz -T2 -6 > "$WORK/legacy/b/site.tar.xz"
  echo "$LEGACY_IMPLS" > "$WORK/legacy/b/impls.txt"
  tar -C "$WORK/legacy/b" -cf "$OUT/ddt-legacy/legacy.tar" .
  cat > "$OUT/ddt-legacy/stage.sh" <<'STAGE'
set -e; mkdir -p /tmp/ddt/legacy; cp "$(dirname "$0")"/legacy.tar /tmp/ddt/legacy/; echo "legacy staged"
STAGE
  du -sh "$OUT/ddt-legacy"
fi
[[ " $PARTS " == *" main "* ]] || exit 0
mkdir -p "$WORK/dl" "$WORK/bundle/site" "$WORK/bundle/whl" "$WORK/bundle/impl"
# shellcheck disable=SC2086
$PIP download -q --no-deps $PLAT -d "$WORK/dl" "${SITE_PKGS[@]}"
# shellcheck disable=SC2086
$PIP download -q --no-deps $PLAT -d "$WORK/bundle/whl" "${INSTALL_WHEELS[@]}"
for w in "$WORK"/dl/*.whl; do
  case "$(basename "$w")" in
    sglang_kernel-*) unzip -q -o "$w" -d "$WORK/bundle/site" -x 'sgl_kernel/flash_ops.abi3.so' \
                       'sgl_kernel/flashmla_ops.abi3.so' 'sgl_kernel/infllm_ops*' 'sgl_kernel/sm100/*' ;;
    *) unzip -q -o "$w" -d "$WORK/bundle/site" ;;
  esac
done
find "$WORK/bundle/site" -name __pycache__ -prune -exec rm -rf {} +
tar -C "$WORK/bundle/site" -cf - . | xz -T2 -6 > "$WORK/bundle/site.tar.xz"
rm -rf "$WORK/bundle/site"
: > "$WORK/bundle/impl/impls.tsv"
for name in $IMPLS; do
  case "$name" in
    sglang-[0-9]*)  # a release: its wheel's sglang package as a python/ tree (no multimodal_gen, tests, Rust .so)
      version=${name#sglang-}
      # shellcheck disable=SC2086
      $PIP download -q --no-deps $PLAT -d "$WORK/rel-$version" "sglang==$version"
      mkdir -p "$WORK/rel-$version/tree/python"
      unzip -q -o "$WORK"/rel-"$version"/sglang-*.whl 'sglang/*' -d "$WORK/rel-$version/tree/python" \
        -x 'sglang/multimodal_gen/*' 'sglang/test/*' 'sglang/srt/rust_extensions/*.so'
      tar -C "$WORK/rel-$version/tree" -cf - python | xz -T2 -6 > "$WORK/bundle/impl/$name.tar.xz"
      printf '%s\tgithub.com/sgl-project/sglang\trelease\tv%s\n' "$name" "$version" >> "$WORK/bundle/impl/impls.tsv"
      continue ;;
  esac
  [ -n "$IMPLS_DIR" ] || { echo "DDTREE_IMPLS_DIR: the folder holding the DDTree trees' tarballs (for $name)" >&2; exit 2; }
  line=$(printf '%s\n' "$MANIFEST" | awk -F'|' -v n="$name" '$1 == n')
  [ -n "$line" ] || { echo "unknown implementation $name (known: $(printf '%s\n' "$MANIFEST" | cut -d'|' -f1 | xargs))" >&2; exit 1; }
  tarball=$(printf '%s' "$line" | cut -d'|' -f2)
  cp "$IMPLS_DIR/$tarball" "$WORK/bundle/impl/$name.tar.xz"
  printf '%s\n' "$line" | awk -F'|' '{print $1 "\t" $3 "\t" $4 "\t" $5}' >> "$WORK/bundle/impl/impls.tsv"
done
tar -C "$WORK/bundle" -cf "$WORK/bundle.tar" .
( cd "$WORK" && split -b "$PART_BYTES" -d -a 2 bundle.tar part_ )
rm -rf "$OUT"/ddt-[0-9]*  # the parts of an earlier build (ddt-legacy, built above, stays)
k=0
for p in "$WORK"/part_*; do
  k=$((k + 1)); mkdir -p "$OUT/ddt-$k"; mv "$p" "$OUT/ddt-$k/"
  cat > "$OUT/ddt-$k/stage.sh" <<'STAGE'
set -e; mkdir -p /tmp/ddt/parts; cp "$(dirname "$0")"/part_* /tmp/ddt/parts/; ls /tmp/ddt/parts | tr '\n' ' '; echo "staged"
STAGE
done
sha256sum "$WORK/bundle.tar" | cut -d' ' -f1 > "$OUT/ddt-$k/bundle.sha256"
echo "$k" > "$OUT/ddt-$k/parts.count"
du -sh "$OUT"/ddt-*
echo "carry in $k back-to-back calls; the last runs scripts/ddtree-device-setup.sh"
