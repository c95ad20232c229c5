"""Environments the tests build for themselves, derived from the RUNNING one.

``python -m venv --system-site-packages`` gives the new venv the *base* interpreter's site-packages: run from
inside a virtualenv (the README's commands after ``python -m venv .venv && . .venv/bin/activate``) that is not
where ``scripts/setup.sh`` put torch, pytest-xdist, SGLang or this package's pytest plugin, so an install into
it cannot resolve its dependencies offline and a pytest in it does not know the suite's options (exit 4).

:func:`venv_over_running` makes a venv without the base's packages instead, whose ``site-packages`` holds one
``.pth`` that adds the running interpreter's site directories (``site.getsitepackages()``, and the user site
when it is enabled here: ``pip install --user``) with ``site.addsitedir``, so their own ``.pth`` files (editable
installs) work too. What is installed into the new venv comes first on its path; everything else is what this
interpreter sees, whether it is a virtualenv's, the system's (CI) or a user install's.
"""

from __future__ import annotations

import fcntl
import os
import site
import sys
import venv
from contextlib import contextmanager
from pathlib import Path

PTH = "_ddtree_running_env.pth"


def running_site_dirs() -> list[str]:
    """The site directories of the running interpreter, in its order."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def venv_site_packages(where: Path) -> Path:
    return where / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def venv_over_running(where: Path, with_pip: bool = False) -> Path:
    """A fresh venv at ``where`` over the running environment; returns its ``python``."""
    venv.EnvBuilder(system_site_packages=False, with_pip=with_pip, clear=True).create(where)
    purelib = venv_site_packages(where)
    assert purelib.is_dir(), f"no {purelib} in the new venv"
    adds = "; ".join(f"site.addsitedir({d!r})" for d in running_site_dirs())
    (purelib / PTH).write_text(f"import site; {adds}\n")
    return where / "bin" / "python"


@contextmanager
def locked(path: Path):
    """An exclusive ``fcntl`` lock on ``path`` (created): one xdist worker builds a shared thing, the others wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def own_env() -> dict:
    """The running environment less the outer run's ``DDTREE_*`` (CI exports the implementations and the required
    backends): a test's own sweep chooses what it runs, and does not collect the implementations' grid for nothing."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DDTREE_")}
