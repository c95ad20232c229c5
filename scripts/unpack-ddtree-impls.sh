#!/usr/bin/env bash
# Unpack the DDTree implementations kept as tarballs (each a DDTree branch of SGLang's python/ tree) and
# name each by repo and commit (ddtree-impl.json beside its python/, ddtree_compat/identity.py reads it).
#   bash scripts/unpack-ddtree-impls.sh TARBALL_DIR [OUT_DIR]     (OUT_DIR default .ddtree/impls)
# TARBALL_DIR: the folder holding your copies of the DDTree trees as python/ tarballs (names as in REPO below).
# Prints the value for DDTREE_IMPLS (OUT_DIR/<name> joined by ':'); prints nothing when no tarball is there.
set -euo pipefail
SRC=${1:?usage: bash scripts/unpack-ddtree-impls.sh TARBALL_DIR [OUT_DIR]}
OUT=${2:-.ddtree/impls}
# name -> repo commit (from the tarballs' README: the branches as published)
declare -A REPO=(
  [rancy-ddtree-v2-433c58ed]="https://github.com/Rancy-Wang/sglang 433c58ed70cd1dabe5a07a83da12f1513cd599ae"
  [rancy-ddtree-398fc2c7]="https://github.com/Rancy-Wang/sglang 398fc2c7261af88b93b772ab1c9d6c4dba612745"
  [dbguo-ddtree-dev-514ea1f3]="https://github.com/DB-Guo/sglang-ddtree-dev 514ea1f3ec39e006b2556bfed6c0c77c8fa0c531"
)
paths=()
for tarball in "$SRC"/*.tar.xz; do
  [ -e "$tarball" ] || continue
  name=$(basename "$tarball" .tar.xz)
  dest="$OUT/$name"
  if [ ! -d "$dest/python/sglang" ]; then
    mkdir -p "$dest"
    tar -xJf "$tarball" -C "$dest"
  fi
  read -r repo commit <<<"${REPO[$name]:-}"
  printf '{"name": "%s", "repo": "%s", "commit": "%s"}\n' "$name" "${repo:-}" "${commit:-}" > "$dest/ddtree-impl.json"
  paths+=("$(cd "$dest" && pwd)")
done
(IFS=:; echo "${paths[*]:-}")
