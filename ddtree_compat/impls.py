"""DDTree implementations: where a user's DDTree build of SGLang is, what it is, and what it has.

Released SGLang has no DDTree; users run DDTree branches of SGLang. The suite tests the one(s) a user
points it at (``--ddtree-impl PATH``, repeatable, or ``DDTREE_IMPLS=PATH[:PATH...]``) and the installed
``sglang`` when it carries DDTree modules. ``PATH`` is a checkout (the folder holding ``python/sglang``),
its ``python`` folder, or the ``sglang`` package folder itself.

What an implementation has is found from its files (feature detection by file and function name, read
with :mod:`ast`, nothing imported, no version guessing): a Triton kernel module of DDTree kernels
(``kernels/ops/speculative/ddtree.py`` or ``srt/speculative/triton_ops/ddtree.py``), CPU helpers in
``srt/speculative/ddtree_utils.py``, and DFlash's CPU tree builder ``build_ddtree_tree_one_req``
(``srt/speculative/dflash_utils.py``). An implementation is named by repo and commit, never by
``sglang.__version__`` (these trees do not set it): :func:`ddtree_compat.identity.identify` (git, else a
``ddtree-impl.json`` beside ``python/``, else ``DDTREE_E2E_IMPL`` for the tree ``import sglang`` loads, else pip's
record), else the folder's name.

Loading (:func:`load_module`, :func:`load_function`) takes the implementation's own code as written: a
kernel or helper module by file path under a private module name (so several implementations and the
installed sglang coexist in one process; those modules import only torch, triton, numpy and the standard
library at their top), and a function whose module needs the whole server (DFlash's builder) compiled from
its own source in that file (the function imports what it needs itself).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .errors import DDTreeInputError
from .identity import identify

ENV = "DDTREE_IMPLS"
KERNEL_MODULES = ("kernels/ops/speculative/ddtree.py", "srt/speculative/triton_ops/ddtree.py")
UTILS_MODULE = "srt/speculative/ddtree_utils.py"
DFLASH_UTILS = "srt/speculative/dflash_utils.py"
LINEAR_MODULES = (
    ("fused_sigmoid_gating_recurrent", ("kernels/ops/attention/linear/fused_sigmoid_gating_recurrent.py",
                                        "kernels/ops/attention/fla/fused_sigmoid_gating_recurrent.py",
                                        "srt/layers/attention/fla/fused_sigmoid_gating_recurrent.py")),
    ("mamba_state_scatter_triton", ("kernels/ops/mamba/mamba_state_scatter_triton.py",
                                    "srt/layers/attention/mamba/mamba_state_scatter_triton.py")))
"""The tree's own copies of SGLang's linear-attention kernel modules (the GDN recurrent kernel, the state commit's
scatter), by name: each imports only torch and Triton there, so it loads by file path on any SGLang."""


@dataclass(frozen=True)
class DDTreeImpl:
    """One DDTree implementation on disk.

    Attributes:
        name: its column in the matrix (``rancy-ddtree-v2-433c58ed``): identity file, else repo and
            short commit, else the folder name.
        package: the ``sglang`` package folder.
        repo, commit: where it comes from (``""`` when unknown).
        kernel_module: path of its Triton kernel module (``None``: none).
        kernel_functions: the function names defined there.
        utils_module, utils_functions: its ``ddtree_utils.py`` and what it defines.
        dflash_builder: path of the file defining ``build_ddtree_tree_one_req`` (``None``: none).
        linear_modules: ``(name, path, functions)`` of the tree's linear-attention kernel modules
            (:data:`LINEAR_MODULES`) that import nothing but torch and Triton.
    """

    name: str
    package: Path
    repo: str = ""
    commit: str = ""
    kernel_module: Path | None = None
    kernel_functions: frozenset[str] = frozenset()
    utils_module: Path | None = None
    utils_functions: frozenset[str] = frozenset()
    dflash_builder: Path | None = None
    notes: tuple[str, ...] = field(default=())
    linear_modules: tuple[tuple[str, Path, frozenset[str]], ...] = ()

    @property
    def identity(self) -> dict:
        """For the results file's ``env`` line: name, repo, commit, path."""
        return {"name": self.name, "repo": self.repo, "commit": self.commit, "path": str(self.package)}

    def has(self, function: str) -> bool:
        return function in self.kernel_functions or function in self.utils_functions or (
            function == "build_ddtree_tree_one_req" and self.dflash_builder is not None)


def _functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _package_dir(path: Path) -> Path | None:
    for candidate in (path / "python" / "sglang", path / "sglang", path):
        if (candidate / "__init__.py").is_file() and candidate.name == "sglang":
            return candidate
    return None


def describe(path: str | os.PathLike) -> DDTreeImpl | None:
    """The implementation at ``path``, or ``None`` when it holds no DDTree code.

    Raises:
        DDTreeInputError: ``path`` is no SGLang tree.
    """
    package = _package_dir(Path(path).resolve())
    if package is None:
        raise DDTreeInputError("--ddtree-impl", str(path), "a DDTree SGLang checkout (holding python/sglang) or its "
                               "sglang package folder", "no sglang package there")
    kernel = next((package / m for m in KERNEL_MODULES if (package / m).is_file()), None)
    utils = package / UTILS_MODULE if (package / UTILS_MODULE).is_file() else None
    dflash = package / DFLASH_UTILS
    builder = dflash if dflash.is_file() and "build_ddtree_tree_one_req" in _functions(dflash) else None
    if kernel is None and utils is None and builder is None:
        return None
    # DDTREE_E2E_IMPL names the sglang that Python imports (the servers'); a tree given by another path is named by
    # its own git, identity file or folder, never by that variable (a device run named rancy-ddtree-v2 sglang-0.5.23)
    ident = identify(str(package), None, env=None if package == _importable_package() else {})
    name = ident.name or package.parent.parent.name
    return DDTreeImpl(name, package, ident.repo, ident.commit, kernel,
                          _functions(kernel) if kernel else frozenset(), utils,
                          _functions(utils) if utils else frozenset(), builder, linear_modules=_linear(package))


def _linear(package: Path) -> tuple[tuple[str, Path, frozenset[str]], ...]:
    """The tree's linear-attention kernel modules (:data:`LINEAR_MODULES`) whose top-level imports are torch and
    Triton alone (read, not imported)."""
    out = []
    for name, candidates in LINEAR_MODULES:
        path = next((package / c for c in candidates if (package / c).is_file()), None)
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        roots = {(a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
                 for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        if roots <= {"typing", "torch", "triton", "functools", "__future__", "math"}:
            out.append((name, path, _functions(path)))
    return tuple(out)


def _importable_package() -> Path | None:
    """The folder of the ``sglang`` package that ``import sglang`` would load (located, not imported)."""
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def installed() -> DDTreeImpl | None:
    """The installed ``sglang``, when it has DDTree modules (found without importing it)."""
    package = _importable_package()
    if package is None:
        return None
    try:
        return describe(package)
    except DDTreeInputError:
        return None


def discover(paths: list[str]) -> list[DDTreeImpl]:
    """The implementations of ``paths`` (each must hold DDTree code), then the installed sglang's if it has
    any and is not among them. Names are made unique.

    Raises:
        DDTreeInputError: a path that is no SGLang tree or holds no DDTree code.
    """
    found = []
    for p in paths:
        impl = describe(p)
        if impl is None:
            raise DDTreeInputError("--ddtree-impl", p, "an SGLang tree with DDTree modules (" +
                                   ", ".join((*KERNEL_MODULES, UTILS_MODULE)) + ")", "no DDTree code found")
        found.append(impl)
    own = installed()
    if own is not None and own.package not in {i.package for i in found}:
        found.append(own)
    names: dict[str, int] = {}
    unique = []
    for impl in found:
        n = names[impl.name] = names.get(impl.name, 0) + 1
        unique.append(impl if n == 1 else DDTreeImpl(**{**impl.__dict__, "name": f"{impl.name}.{n}"}))
    return unique


def paths_from_env() -> list[str]:
    return [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def _private_name(path: Path) -> str:
    return f"_ddtree_impl_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{path.stem}"


@cache
def load_module(path: Path, lift_device_guards: bool = False):
    """The module at ``path``, loaded by file path under a private name (its own code, unchanged).

    With ``lift_device_guards`` (the interpret tier: Triton's interpreter runs the kernels on CPU tensors)
    the module is compiled from its own source with its device guards left out (:func:`lift_device_guards`)
    and nothing else changed, under another private name.

    Raises:
        ImportError: the module's own imports fail here.
    """
    import sys

    name = _private_name(path) + ("_interpret" if lift_device_guards else "")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look their module up by name
    try:
        if lift_device_guards:
            tree, lifted = without_device_guards(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            module.__dict__["__ddtree_lifted_guards__"] = lifted
            exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the implementation's own code
        else:
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _is_device_guard(node: ast.stmt) -> bool:
    """``if not X.is_cuda: raise ...`` (one statement, no else): a wrapper refusing CPU tensors."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Attribute)
            and test.operand.attr == "is_cuda" and len(node.body) == 1 and isinstance(node.body[0], ast.Raise)
            and not node.orelse)


def without_device_guards(tree: ast.Module) -> tuple[ast.Module, tuple[int, ...]]:
    """``tree`` with every device guard (:func:`_is_device_guard`) replaced by ``pass`` (line numbers kept,
    so tracebacks point into the implementation's file); returns the lifted guards' line numbers."""
    lifted = []

    class Lift(ast.NodeTransformer):
        def visit_If(self, node):
            if _is_device_guard(node):
                lifted.append(node.lineno)
                return ast.copy_location(ast.Pass(), node)
            return self.generic_visit(node)

    return ast.fix_missing_locations(Lift().visit(tree)), tuple(lifted)


@cache
def load_function(path: Path, function: str):
    """One top-level function of ``path``, compiled from its own source there, for a module whose other
    top-level imports need the whole SGLang server (DFlash's ``dflash_utils.py``: torchvision, the
    quantization layers). Its globals are ``torch`` and ``numpy`` (what it uses besides what it imports
    itself).

    Raises:
        KeyError: no such top-level function.
    """
    import numpy
    import torch

    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None:
        raise KeyError(f"{path} defines no {function}")
    future = ast.ImportFrom(module="__future__", names=[ast.alias("annotations")], level=0)
    module = ast.fix_missing_locations(ast.Module(body=[future, node], type_ignores=[]))
    namespace = {"torch": torch, "np": numpy, "numpy": numpy, "__name__": _private_name(path)}
    exec(compile(module, str(path), "exec"), namespace)  # noqa: S102 - the implementation's own function
    return namespace[function]
