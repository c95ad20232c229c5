"""The package's shape: imports point one way (no cycles, even through function-level imports), reading
results needs no torch, and the installed plugin leaves a foreign test session alone."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import ddtree_compat

PACKAGE = Path(ddtree_compat.__file__).parent
ROOT = PACKAGE.parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package ``name`` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:
                sub = f"{stem}.{alias.name}"
                found.add(sub if sub in modules else stem)
    return {m for m in found if m in modules and m != name}


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"
    assert len(graph) > 40 and graph["ddtree_compat.plugin.session"], "the walk found the package's imports"


def _all_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """Package modules (as above) and third-party top-level names a module imports, anywhere in it."""
    third = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            third |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            third.add(node.module.split(".")[0])
    return _imports(name, path, modules) | third


CORE = ("outcomes", "faults", "errors", "exitcodes", "arch", "tiers", "imports", "tree", "cases", "results", "families")
"""Layers 0 and 1 (docs/architecture.md): they import no family."""
DESCRIBING = ("records", "known_issues", "case_lookup", "gate", "report")
"""Layer 2 outside the family folders: torch-free, they may read the families' records, oracles and places."""
ABOVE = ("ddtree_compat.harness", "ddtree_compat.backends", "ddtree_compat.plugin", "ddtree_compat.cli",
         "ddtree_compat.static", "ddtree_compat.e2e")


def _layer_breaks() -> list[str]:
    modules = _modules()
    out = []
    for name, path in modules.items():
        imported = _all_imports(path, name, modules)
        short = name.removeprefix("ddtree_compat.")
        parts = short.split(".")
        if short in CORE:
            below = ABOVE + ("ddtree_compat.families.",)
            out += [f"{name} -> {m}" for m in imported if m.startswith(below) and m != "ddtree_compat.families"]
        elif parts[0] in DESCRIBING:
            out += [f"{name} -> {m}" for m in imported if m in ("torch", "triton") or m.startswith(ABOVE)
                    or m.endswith((".checks", ".graphs", ".variants", ".reference"))]
        elif parts[0] == "harness":
            out += [f"{name} -> {m}" for m in imported if m.startswith(("ddtree_compat.families", "ddtree_compat.plugin",
                                                                         "ddtree_compat.cli"))]
        elif parts[0] == "families" and len(parts) == 3:
            out += [f"{name} -> {m}" for m in imported if m.startswith(("ddtree_compat.plugin", "ddtree_compat.cli",
                                                                         "ddtree_compat.e2e", "ddtree_compat.static.runner"))]
            if parts[2] in ("records", "oracle", "places") and short != "families.attention.oracle":  # torch-free
                out += [f"{name} -> {m}" for m in imported if m in ("torch", "triton") or m.startswith(ABOVE)
                        or m.endswith((".checks", ".graphs", ".variants", ".reference"))]
    return sorted(out)


def test_layers_point_one_way():
    """The table of docs/architecture.md: the core imports no family, harness or backend; the harness imports
    no family; a family's records, oracle and places are torch-free and import nothing that runs a cell."""
    assert _layer_breaks() == []


NO_TORCH = "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"


def _without_torch(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _results_file(path: Path) -> Path:
    env = {"kind": "env", "env_id": "e1", "tier": "interpret", "gpus": []}
    rows = [{"kind": "result", "kernel": "verify_tree_greedy", "tier": "interpret", "backend": b, "arch": "interpret",
             "case_id": f"b8-spine-deep-bs{n}", "outcome": "pass", "budget": 8, "topology": "spine", "plant": "deep",
             "batch": n, "block_size": 16, "mode": "spine", "layout": "exact", "env_id": "e1"}
            for b in ("oracle", "sglang-triton") for n in (1, 3)]
    path.write_text("".join(json.dumps(x) + "\n" for x in [env, *rows]))
    return path


def test_report_diff_and_cases_need_no_torch(tmp_path):
    results = _results_file(tmp_path / "r.jsonl")
    probe = _without_torch("import torch\n", tmp_path)
    assert probe.returncode != 0 and "import of torch halted" in probe.stderr, probe.stderr
    code = ("from ddtree_compat.cli import main\n"
            f"assert main(['report', {str(results)!r}, '-o', 'm.md', '--html', 'm.html']) == 0\n"
            f"assert main(['diff', {str(results)!r}, {str(results)!r}, '-o', 'g.md']) == 0\n"
            "assert main(['cases', '--profile', 'default']) == 0\n"
            "assert main(['cases', '--attention', 'interpret']) == 0\n"
            "assert 'torch' not in {k for k, v in sys.modules.items() if v is not None}\n")
    run = _without_torch(code, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "b8-spine-deep-bs3" in run.stdout and "1144 cases" in run.stderr
    assert (tmp_path / "m.md").read_text().count("sglang-triton") >= 1 and (tmp_path / "m.html").exists()
    assert "PASS" in (tmp_path / "g.md").read_text()


FOREIGN = '''
import os
import pathlib

from hypothesis import given, settings, strategies as st


def test_environment_untouched():
    assert os.environ.get("TRITON_INTERPRET") is None


def test_threads_untouched():
    import torch
    assert torch.get_num_threads() == int(os.environ["EXPECTED_THREADS"])


@given(st.integers())
def test_hypothesis_profile_untouched(x):
    assert (settings._current_profile, settings().max_examples) == (
        os.environ["EXPECTED_PROFILE"], int(os.environ["EXPECTED_EXAMPLES"]))
'''


def test_a_foreign_session_is_left_alone(pytester, monkeypatch):
    """An unrelated test folder, run with this package installed (its plugin loaded by entry point), under
    xdist: no TRITON_INTERPRET, no .ddtree/ folder, the profile hypothesis picks by itself, torch's own threads."""
    pytester.makepyfile(test_foreign=FOREIGN)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # this test session's own interpret tier may have set it
    threads = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("EXPECTED_THREADS", threads)
    # hypothesis picks its own profile: "ci" where a CI variable is set (as on the CI runner), else "default"
    profile, examples = subprocess.run(
        [sys.executable, "-c", "from hypothesis import settings; print(settings._current_profile, settings().max_examples)"],
        capture_output=True, text=True, check=True).stdout.split()
    monkeypatch.setenv("EXPECTED_PROFILE", profile)
    monkeypatch.setenv("EXPECTED_EXAMPLES", examples)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=3)
    assert not (pytester.path / ".ddtree").exists()
    assert " ddtree-compat -" not in result.stdout.str() and "results: " not in result.stdout.str()


LIGHT = '''
import sys


def test_nothing_heavy_was_imported():
    heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "triton", "sglang"))
                   or m.startswith("ddtree_compat.families.") and m.endswith((".checks", ".graphs")))
    assert not heavy, heavy
'''


def test_a_foreign_session_imports_neither_torch_nor_the_kernels(pytester):
    """The plugin installed, an unrelated test file: no GPU detection (it imports torch where NVML is missing),
    no torch, no Triton, no check module, whether or not the host has NVML."""
    pytester.makepyfile(test_light=LIGHT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_every_package_folder_ships():
    """``pyproject.toml`` lists the packages (the kernel tests are mapped from tests/kernels): a package folder
    missing from that list would be left out of the wheel."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found | {"ddtree_compat.kernel_tests"} == listed, (sorted(found - listed), sorted(listed - found))
    assert setup["package-dir"] == {"ddtree_compat.kernel_tests": "tests/kernels"}
    assert (ROOT / "tests" / "kernels" / "__init__.py").exists()
