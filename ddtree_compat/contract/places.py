"""Where an SGLang release (or a DDTree tree of SGLang) keeps each kernel: looked up, not assumed.

Each kernel a backend runs has a table of :class:`Place` s, the modules and names it has had (facts read
from the releases' sources: 0.5.12, 0.5.15, 0.5.18, 0.5.20, 0.5.22, 0.5.23, and the DDTree trees of June
and July 2026). :func:`locate` returns the first place the installed SGLang has. A place is either the
release's own wrapper (``wrapper``: called as SGLang calls it) or, where a release keeps the Triton kernel
but its wrapper sits in a module that needs the whole server, the kernel itself (``launch``: launched with
the grid and constexprs its wrapper derives, written down in the adapter); results say which.

Importing: ``import sglang`` runs ``srt/utils/common.py``, which imports ``torchvision`` at its top in
0.5.12 .. 0.5.20 and in the DDTree trees; PyPI's torchvision wheel needs a CUDA torch. Kernel modules do
not need it. So when importing a kernel module fails inside ``sglang/__init__.py``'s imports,
:func:`import_module` registers the ``sglang`` package without executing its ``__init__`` (its spec's
search path only) and imports the kernel module again: the module's own imports run as written. What
that skips: ``sglang/__init__``'s API re-exports, the HF-transformers patches, and (0.5.18+) the cache
directory defaults it sets for Triton and others.

Outcomes of a lookup: found; **absent** (no place's module defines the name: this SGLang does not have the
kernel; a counted skip that says where the suite looked); **missing dependency** (a place's module exists
but cannot be imported here: one of its own imports is not installed, or it raises while importing, e.g.
its model configs clash with the installed transformers; a skip naming it, when no later place works).
:class:`AdapterError` is the suite's own failure (outcome ``error``, never a kernel fault).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """One place a kernel has been kept.

    Attributes:
        module: dotted module name (``sglang.kernels.ops.speculative.spec_tree``).
        name: the function there.
        kind: ``wrapper`` (SGLang's host function, called as SGLang calls it), ``launch`` (a
            ``@triton.jit`` kernel, launched as its wrapper launches it, or compiled by the static tier) or
            ``loader`` (a function whose call builds a JIT module: the static tier runs it per arch).
        seen: the releases and trees seen keeping it there, comma-separated: ``0.5.23``, ``0.5.18+``,
            ``0.5.15-0.5.22``, or a tree's name (:meth:`kept_in` reads the releases; the unit tests hold them).
    """

    module: str
    name: str
    kind: str = "wrapper"
    seen: str = ""

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"

    def kept_in(self, release: str) -> bool:
        """Whether ``seen`` names this SGLang release: ``0.5.23``, ``0.5.18+`` (that one and later) or
        ``0.5.15-0.5.22`` (a range); the names of DDTree trees in it are not releases. The unit tests hold a
        place to it: a place the installed release is said to keep must be there (a misspelled module would
        otherwise read *absent* in every release)."""
        wanted = _release(release)
        if wanted is None:
            return False
        for item in (part.strip() for part in self.seen.split(",")):
            low, dash, high = item.rstrip("+").partition("-")
            first, last = _release(low), _release(high) if dash else None
            if first is None or (dash and last is None):
                continue  # a DDTree tree's name, or words
            if item.endswith("+"):
                hit = wanted >= first
            elif dash:
                hit = first <= wanted <= last
            else:
                hit = wanted == first
            if hit:
                return True
        return False


def _release(text: str) -> tuple[int, ...] | None:
    parts = text.strip().split(".")
    return tuple(map(int, parts)) if len(parts) == 3 and all(p.isdigit() for p in parts) else None


class Absent(Exception):
    """No place defines the kernel in this SGLang (the message says where the suite looked)."""


class MissingDependency(Exception):
    """A place's module exists but one of its own imports is not installed here."""


class AdapterError(Exception):
    """The suite's own adapter failed (an unexpected error while importing or binding a call): reported as
    outcome ``error``, never as a kernel fault."""


def _sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - no distribution record (a copied tree)
        return "(unknown version)"


def _without_init() -> None:
    """Register ``sglang`` as a package whose ``__init__`` is not executed (its search path only)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None:
        raise ModuleNotFoundError("No module named 'sglang'", name="sglang")
    module = importlib.util.module_from_spec(spec)
    module.__ddtree_noinit__ = True  # registered, not executed
    sys.modules["sglang"] = module


def _register_without_init(package: str) -> None:
    """Register ``package`` (a subpackage of a registered parent) without executing its ``__init__``."""
    parent, _, last = package.rpartition(".")
    spec = importlib.machinery.PathFinder.find_spec(package, sys.modules[parent].__path__)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {package!r}", name=package)
    module = importlib.util.module_from_spec(spec)
    module.__ddtree_noinit__ = True
    sys.modules[package] = module
    setattr(sys.modules[parent], last, module)


def import_module(name: str):
    """Import an SGLang kernel module; when a package ``__init__`` on its path is what fails (a dependency
    the kernels do not use: ``sglang/__init__`` imports torchvision in 0.5.12 .. 0.5.20, and 0.5.18 /
    0.5.20's ``sglang/kernels/__init__`` imports every op group, one of which needs it too), import it
    again with those packages registered but not executed; the module's own imports run as written.

    Raises:
        ImportError: the module (or one of its own imports) cannot be imported either way.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        root = sys.modules.get("sglang")
        if not name.startswith("sglang.") or (root is not None and not getattr(root, "__ddtree_noinit__", False)):
            raise  # sglang imported as a whole: the module's own import failed
    if "sglang" not in sys.modules:
        _without_init()
    try:
        return importlib.import_module(name)
    except ImportError:
        parts = name.split(".")
        missing = [".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) not in sys.modules]
        if not missing:
            raise
    for package in missing:  # every package on the path, registered but not executed
        _register_without_init(package)
    return importlib.import_module(name)


@functools.cache
def _defines(module: str, name: str) -> bool | None:
    """Whether ``module``'s source file defines ``name`` at its top (``None``: no source file to read), read
    without importing it: a release whose module lacks the kernel is *absent*, not a failed import."""
    root = sys.modules.get("sglang")
    locations = list(getattr(root, "__path__", None) or [])
    if not locations:
        spec = importlib.util.find_spec("sglang") if module.startswith("sglang.") else None
        locations = list(spec.submodule_search_locations or []) if spec else []
    if not module.startswith("sglang.") or not locations:
        return None
    rel = Path(*module.split(".")[1:])
    for base in locations:
        for path in (Path(base) / rel.with_suffix(".py"), Path(base) / rel / "__init__.py"):
            if path.is_file():
                tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
                names = set()
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(node.name)
                    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        names |= {t.id for t in targets if isinstance(t, ast.Name)}
                    elif isinstance(node, (ast.Import, ast.ImportFrom)):
                        names |= {(a.asname or a.name).split(".")[0] for a in node.names}
                return name in names
    return False


@functools.cache
def locate(places: tuple[Place, ...]):
    """``(object, place)`` of the first place this SGLang has (looked up once per process).

    Raises:
        Absent: no place's module defines the name.
        MissingDependency: the first place whose module exists cannot be imported for a missing module.
        AdapterError: anything else went wrong while importing.
    """
    first_missing = None
    for place in places:
        if _defines(place.module, place.name) is False:
            continue  # this release's module (or its file) does not have it
        try:
            module = import_module(place.module)
        except ImportError as e:
            if isinstance(e, ModuleNotFoundError) and e.name and (place.module == e.name or
                                                                   place.module.startswith(f"{e.name}.")):
                continue  # the module itself is not in this SGLang: look on
            where = " (docs/installing.md: which package, what it enables, where it installs)" if isinstance(
                e, ModuleNotFoundError) else ""
            first_missing = first_missing or MissingDependency(
                f"cannot import {place.module}: {type(e).__name__}: {e}".replace("\n", " ")[:400] + where)
            continue
        except Exception as e:  # noqa: BLE001 - the module raised while importing here (e.g. a transformers
            # version its configs clash with): this place is unusable here; said in the skip if no place works
            first_missing = first_missing or MissingDependency(
                f"importing {place.module} raised {type(e).__name__}: {e}".replace("\n", " ")[:400])
            continue
        obj = getattr(module, place.name, None)
        if obj is not None:
            return obj, place
    if first_missing is not None:
        raise first_missing
    others = sorted({p.module.split(".")[0] for p in places} - {"sglang"})
    where = f"{', '.join(others)} not installed here" if others else f"absent in sglang {_sglang_version()}"
    raise Absent(f"{where}: looked for " + ", ".join(map(str, places)))


@functools.cache
def reason(places: tuple[Place, ...]) -> str | None:
    """``None`` when a place is found, else the skip reason (absent / missing dependency); once per process.

    Raises:
        AdapterError: as :func:`locate`.
    """
    try:
        locate(places)
    except (Absent, MissingDependency) as e:
        return str(e)
    return None
