#!/usr/bin/env bash
# Bytecode for the lent GPU host's Python packages, as pip writes it at install: that host sets
# PYTHONDONTWRITEBYTECODE=1 and its torch venv and our carries have no __pycache__, so every process compiled
# torch, SGLang and transformers from source (an SGLang server's HTTP import ~30 s; each sweep worker's first
# SGLang cell 12-16 s). Once per machine for the interpreter's site-packages, then for each folder given.
#     bash scripts/device-bytecode.sh [DIR...]
purelib=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ ! -f /tmp/.bytecode-venv.ok ]; then
  python3 -m compileall -q -j 0 "$purelib" > /dev/null 2>&1; touch /tmp/.bytecode-venv.ok
fi
[ $# -gt 0 ] && python3 -m compileall -q -j 0 "$@" > /dev/null 2>&1
exit 0
