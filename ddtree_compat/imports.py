"""Importing a module of a system under test, with the one narrow rule for "not here" (torch-free).

A module of SGLang (or of Triton) that does not import is one of two things:

* **missing here**: the distribution is not installed (``No module named 'sglang'``) or one of its
  dependencies is not (``No module named 'torchvision'``): a fact about this machine, so a skip whose
  reason names the missing module;
* **our error**: the distribution is installed but the module we name is not in it (a wrong name in an
  adapter, or a release that moved it), or the import raised anything other than
  ``ModuleNotFoundError``: raised as it is, so the test or cell that asked reports it (never a skip).

:func:`missing` answers the first and raises the second. (SGLang's *kernels* are looked up where each
release keeps them instead, :mod:`ddtree_compat.contract.places`, where a kernel no place holds is
*absent*: a skip that says where the suite looked.)
"""

from __future__ import annotations

import importlib
import importlib.util


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def missing(module: str) -> str | None:
    """Import ``module``; ``None`` when it imports, else why it is missing here (see the module docstring).

    Raises:
        ModuleNotFoundError: the module's own distribution is installed but has no such module (our name
            is wrong, or the installed release moved it).
        Exception: whatever else the import raised (a broken install or our error), unchanged.
    """
    top = module.partition(".")[0]
    if importlib.util.find_spec(top) is None:
        return f"{top} is not installed (No module named {top!r}), needed for {module}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and not _inside(e.name, top):
            return f"{module} needs {e.name}, which is not installed (No module named {e.name!r})"
        raise
    return None

