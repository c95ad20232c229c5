"""A server process started before its arguments are known.

A server's first seconds are ``python -m sglang.launch_server``'s imports (torch, SGLang's server arguments
and utilities: 10-20 s with a dozen servers starting at once on the lent H200), and its arguments wait for the
session's probe of the installed SGLang, which imports the same modules for as long. A **standby** overlaps
the two: started with the session, it imports what the server module imports before it reads its arguments
(the module's own top-level ``import`` statements, in their order; nothing of its ``__main__`` block), then
blocks on one line of stdin. :meth:`ddtree_compat.e2e.process.ServerProcess.release` writes the argv there; the
standby then runs the module as ``__main__`` exactly as ``python -m`` does (``runpy``, ``sys.argv`` and
``__spec__`` set, so SGLang's spawned children import it by name as under ``-m``). An empty line dismisses it
(it exits 0). A module that fails to import during the standby is not reported there: the run imports it
again and fails as ``python -m`` would, in the server's log.
"""

from __future__ import annotations

SCRIPT = r"""
import ast, importlib, importlib.util, json, os, runpy, sys
module = sys.argv[1]
try:  # what `python -m module` imports before it reads its arguments: the module's top-level imports
    with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    for node in body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            importlib.import_module(name)
except Exception:
    pass
line = sys.stdin.readline()
argv = json.loads(line) if line.strip() else None
if not argv:
    sys.exit(0)
null = os.open(os.devnull, os.O_RDONLY)  # the server's stdin, as for a server started directly
os.dup2(null, 0)
os.close(null)
sys.stdin = open(os.devnull)
sys.argv = [module, *argv]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
"""``python -c SCRIPT MODULE``: the standby (see the module docstring)."""


def command(python: str, module: str) -> list[str]:
    """The standby's command line for servers run as ``python -m module``."""
    return [python, "-c", SCRIPT, module]
