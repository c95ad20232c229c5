"""The package's shape: imports point one way (no cycles, even through function-level imports), reading
results needs no torch, and the installed plugin leaves a foreign test session alone."""

import ast
import fnmatch
import json
import re
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


FLOOR_ROW = re.compile(r"^\| (\d+) \| [^|]+ \| ([^|]+) \|", re.M)
TORCH_FREE = (3, 4)
"""Floors that import neither torch nor Triton anywhere (docs/architecture.md)."""
NO_TORCH_AT_IMPORT = (0, 1, 2)
"""Floors that import torch and Triton only inside a function."""
BUILDS_ON = {"commit": {"verify"}, "attention": {"verify"}, "ddtree": {"verify"}, "sampling": {"verify"},
             "linear": {"verify"}, "scale": {"ddtree", "attention"}}
"""The families a family may import (docs/architecture.md: a family imports another only if it builds on it)."""


def floor_table() -> dict[str, int]:
    """The floors of docs/architecture.md: a path pattern (relative to ``ddtree_compat/``) -> its floor."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = {}
    for floor, cell in FLOOR_ROW.findall(text):
        for pattern in re.findall(r"`([^`]+)`", cell):
            table[pattern] = int(floor)
    return table


def floor_of(relpath: str, table: dict[str, int]) -> int | None:
    """A module's floor: the table's file of that name, else a matching pattern, else its folder (``contract/``)."""
    if relpath in table:
        return table[relpath]
    globbed = [f for pattern, f in table.items() if "*" in pattern and fnmatch.fnmatchcase(relpath, pattern)]
    if globbed:
        return globbed[0]
    folders = sorted((p for p in table if p.endswith("/") and relpath.startswith(p)), key=len, reverse=True)
    return table[folders[0]] if folders else None


def _module_imports(path: Path) -> tuple[set[str], set[str]]:
    """Third-party top-level names a module imports at module level, and anywhere."""
    tree = ast.parse(path.read_text())
    top, anywhere = set(), set()
    for node in ast.walk(tree):
        names = ({a.name.split(".")[0] for a in node.names} if isinstance(node, ast.Import) else
                 {node.module.split(".")[0]} if isinstance(node, ast.ImportFrom) and not node.level and node.module
                 else set())
        anywhere |= names
        if node in tree.body or (isinstance(node, (ast.Import, ast.ImportFrom)) and node in _module_level(tree)):
            top |= names
    return top, anywhere


def _module_level(tree: ast.Module) -> list:
    """Import statements run at import time: the module's body, and inside its top-level if / try blocks."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, (ast.If, ast.Try)):
            todo += node.body + node.orelse + getattr(node, "finalbody", []) + [
                s for h in getattr(node, "handlers", []) for s in h.body]
    return out


def _layer_breaks() -> list[str]:
    modules, table = _modules(), floor_table()
    floors = {name: floor_of(path.relative_to(PACKAGE).as_posix(), table) for name, path in modules.items()}
    out = [f"{name}: no floor in docs/architecture.md" for name, f in floors.items() if f is None]
    for name, path in modules.items():
        if floors[name] is None:
            continue
        up = [m for m in _imports(name, path, modules) if (floors.get(m) or 0) > floors[name]]
        out += [f"{name} (floor {floors[name]}) -> {m} (floor {floors[m]})" for m in up]
        top, anywhere = _module_imports(path)
        if floors[name] in TORCH_FREE:
            out += [f"{name} (floor {floors[name]}, torch-free) imports {m}" for m in anywhere & {"torch", "triton"}]
        if floors[name] in NO_TORCH_AT_IMPORT:
            out += [f"{name} (floor {floors[name]}) imports {m} at import" for m in top & {"torch", "triton"}]
        parts = name.split(".")
        if parts[1:2] == ["families"] and len(parts) > 3:
            allowed = {parts[2], *BUILDS_ON.get(parts[2], ())}
            others = {m.split(".")[2] for m in _imports(name, path, modules)
                      if m.startswith("ddtree_compat.families.") and len(m.split(".")) > 3}
            out += [f"{name} imports the {f} family, which it does not build on" for f in others - allowed]
    return sorted(out)


def test_layers_point_one_way():
    """The floors of docs/architecture.md: no import points up a floor; floors 3 and 4 are torch-free and floors
    0 to 2 import torch only inside functions; a family imports only the families it builds on."""
    assert _layer_breaks() == []


def test_the_floor_table_names_every_module_once():
    """Every module of the package has a floor in docs/architecture.md (the table the layering rule reads)."""
    modules, table = _modules(), floor_table()
    assert len(table) > 20 and table["contract/"] == 2 and table["plugin/"] == 10, table
    missing = sorted(n for n, p in modules.items() if floor_of(p.relative_to(PACKAGE).as_posix(), table) is None)
    assert not missing, f"modules without a floor in docs/architecture.md: {missing}"


def test_an_import_up_a_floor_is_caught():
    """The rule can fail: a core module importing the plugin, a contract module importing a backend."""
    table = floor_table()
    assert floor_of("outcomes.py", table) < floor_of("plugin/cells.py", table)
    assert floor_of("contract/backend.py", table) < floor_of("backends/oracle_column.py", table)
    assert floor_of("families/verify/records.py", table) < floor_of("families/verify/checks.py", table)
    assert floor_of("families/attention/oracle.py", table) == 6  # a file named wins over the pattern


def test_the_contract_is_one_public_surface():
    """Everything a backend or record author needs is importable from ``ddtree_compat.contract`` (its ``__all__``)."""
    import ddtree_compat.contract as contract

    assert {"Backend", "KernelImpl", "AdapterError", "Place", "locate", "KernelRecord", "unavailable"} <= set(
        contract.__all__)
    assert all(hasattr(contract, n) for n in contract.__all__)


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
    default = sum(r[3] for r in json.loads((ROOT / "ddtree_compat" / "grid_index.json").read_text())["default"])
    assert "b8-spine-deep-bs3" in run.stdout and f"{default} cases" in run.stderr
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

CORE = {"ddtree_compat", "ddtree_compat.arch", "ddtree_compat.errors", "ddtree_compat.outcomes", "ddtree_compat.tiers",
        "ddtree_compat.known_issues"}  # the core, and the manifest's path (the --ddtree-known-issues default)


def test_nothing_heavy_was_imported():
    heavy = sorted(m for m in sys.modules if m in ("torch", "numpy") or m.startswith(("torch.", "numpy.", "triton",
                                                                                        "sglang")))
    assert not heavy, heavy


def test_the_plugin_loaded_only_what_option_parsing_needs():
    ours = sorted(m for m in sys.modules if m.startswith("ddtree_compat") and m not in CORE
                  and not m.startswith("ddtree_compat.plugin"))
    assert not ours, ours
'''


def test_a_foreign_session_imports_neither_torch_nor_the_kernels(pytester):
    """The plugin installed, an unrelated test file: no GPU detection (it imports torch where NVML is missing),
    no torch, NumPy, Triton or SGLang, and of the package only the plugin's modules and the core, whether or not
    the host has NVML."""
    pytester.makepyfile(test_light=LIGHT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


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


def _imported_names(name: str, path: Path, modules: dict[str, Path]):
    """(line, module, name) for every ``from <package module> import name``, function-level ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")
            stem = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        if stem in modules:
            for alias in node.names:
                yield node.lineno, stem, alias.name


def test_every_name_imported_from_the_package_exists():
    """A name moved to another module breaks a function-level import only when that function runs (a
    tier's kernel loader, say); here every such import is resolved at once."""
    import importlib

    modules = _modules()
    missing = []
    for name, path in sorted(modules.items()):
        for line, stem, attr in _imported_names(name, path, modules):
            module = importlib.import_module(stem)
            if not hasattr(module, attr) and f"{stem}.{attr}" not in modules:
                missing.append(f"{path.relative_to(ROOT)}:{line}: {stem} has no {attr}")
    assert not missing, "\n".join(missing)
