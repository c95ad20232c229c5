"""Which SGLang is under test: name it by repository and commit, not by ``sglang.__version__``
(the e2e servers' SGLang, and each DDTree implementation the kernel tiers load, :mod:`ddtree_compat.impls`).

DDTree lives on branches of SGLang whose ``sglang/_version.py`` is generated at build time, so a
checkout or a copied tree reports ``0.0.0.dev0`` (or the version of another installed ``sglang``
distribution): the version string does not identify the code under test. In order:

1. **git**: the ``sglang`` package the probe imported lies in a git work tree (a user's checkout of a
   DDTree branch, ``pip install -e`` or ``PYTHONPATH``): ``origin``'s URL, ``HEAD``'s commit, the branch,
   and whether the tree has local changes (``git status --porcelain``).
2. **identity file**: a ``ddtree-impl.json`` beside the tree's ``python/`` folder (``{"name", "repo",
   "commit"}``), as whoever unpacked a tree without ``.git`` wrote it (``scripts/unpack-ddtree-impls.sh``).
3. **environment**: ``DDTREE_E2E_IMPL`` names it, ``"NAME REPO@COMMIT (BRANCH)"`` or any text whose first
   word is a short name (a tree copied without ``.git``: the device runs set it from the carry's
   ``impls.tsv``, ``scripts/ddtree-device-setup.sh``).
4. **pip**: the ``sglang`` distribution whose files are the imported package records a VCS install
   (``direct_url.json``: ``vcs_info.commit_id`` and ``url``, PEP 610).
5. **version**: ``sglang <version>`` (a release, e.g. 0.5.23 from PyPI, is named by its version).

:func:`identify` returns an :class:`ImplIdentity`; its :attr:`~ImplIdentity.name` becomes part of the
e2e cells' backend (``sglang-ddtree@NAME``), so each implementation is its own column.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

ENV = "DDTREE_E2E_IMPL"


@dataclass(frozen=True)
class ImplIdentity:
    """The SGLang the servers run.

    Attributes:
        name: short name for columns (``rancy-ddtree-v2``, ``sglang-433c58ed``); ``""`` for a release
            named by its version only (the backend stays ``sglang-<algorithm>``).
        label: one line for reports: repository, commit, branch, or the version.
        source: ``git``, ``file``, ``env``, ``pip`` or ``version``.
        repo, commit, branch: what is known (``""`` otherwise).
        dirty: the git tree had local changes.
        path: the imported ``sglang`` package's folder.
    """

    name: str
    label: str
    source: str
    repo: str = ""
    commit: str = ""
    branch: str = ""
    dirty: bool = False
    path: str = ""

    def as_json(self) -> dict:
        return asdict(self)


def _git(path: str, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", path, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _short_repo(url: str) -> str:
    """``github.com/Rancy-Wang/sglang`` from an https / ssh / scp-style git URL (credentials dropped)."""
    url = re.sub(r"^[a-z+]+://", "", url.strip())  # https://, ssh://, git+https://
    host, sep, rest = url.partition("/")
    if "@" in host:  # user[:token]@host
        host = host.rsplit("@", 1)[1]
    if ":" in host and not sep:  # git@github.com:owner/repo (scp style, no slash before the colon)
        host, _, rest = host.partition(":")
        sep = "/"
    elif ":" in host:
        head, _, tail = host.partition(":")
        host, rest = head, f"{tail}/{rest}" if not tail.isdigit() else rest
    return f"{host}{sep}{rest}".removesuffix(".git").rstrip("/")


def from_git(path: str) -> ImplIdentity | None:
    """The git work tree holding ``path``, or ``None``."""
    commit = _git(path, "rev-parse", "HEAD")
    if not commit or not _git(path, "ls-files", "__init__.py"):  # not a work tree, or sglang is not tracked in it
        return None
    repo = _short_repo(_git(path, "remote", "get-url", "origin"))
    branch = _git(path, "rev-parse", "--abbrev-ref", "HEAD")
    dirty = bool(_git(path, "status", "--porcelain", "--untracked-files=no"))
    base = repo.rsplit("/", 1)[-1] if repo else Path(_git(path, "rev-parse", "--show-toplevel") or path).name
    label = f"{repo or base}@{commit} ({branch}{', local changes' if dirty else ''})"
    return ImplIdentity(f"{base}-{commit[:8]}", label, "git", repo, commit, branch, dirty, path)


def from_env(text: str, path: str = "") -> ImplIdentity | None:
    """``DDTREE_E2E_IMPL`` text (``"NAME REPO@COMMIT (BRANCH)"``, or free text: its first word is the name)."""
    text = text.strip()
    if not text:
        return None
    name = text.split()[0]
    m = re.search(r"(\S+)@([0-9a-f]{7,40})\b(?:\s*\(([^)]*)\))?", text)
    repo, commit, branch = (m.group(1), m.group(2), m.group(3) or "") if m else ("", "", "")
    return ImplIdentity(name, text, "env", repo, commit, branch, False, path)


def from_direct_url(direct_url: dict | None, path: str = "") -> ImplIdentity | None:
    """A PEP 610 ``direct_url.json`` with ``vcs_info`` (``pip install git+https://...@commit``)."""
    vcs = (direct_url or {}).get("vcs_info") or {}
    if not vcs.get("commit_id"):
        return None
    repo, commit = _short_repo(direct_url.get("url", "")), vcs["commit_id"]
    branch = vcs.get("requested_revision", "")
    base = repo.rsplit("/", 1)[-1] or "sglang"
    return ImplIdentity(f"{base}-{commit[:8]}", f"{repo}@{commit}" + (f" ({branch})" if branch else ""), "pip",
                          repo, commit, branch, False, path)


IDENTITY_FILE = "ddtree-impl.json"


def from_file(path: str) -> ImplIdentity | None:
    """A ``ddtree-impl.json`` beside the tree's ``python/`` folder (or beside the package), or ``None``.

    Raises:
        ValueError: the file is not a JSON object.
    """
    package = Path(path)
    root = package.parent.parent if package.parent.name == "python" else package.parent
    for folder in (root, package.parent):
        f = folder / IDENTITY_FILE
        if f.is_file():
            import json

            data = json.loads(f.read_text())
            if not isinstance(data, dict):
                raise ValueError(f"{f}: not a JSON object")
            repo, commit = str(data.get("repo", "")), str(data.get("commit", ""))
            name = str(data.get("name") or f"{root.name}")
            label = f"{_short_repo(repo) if repo else name}@{commit}" if commit else name
            return ImplIdentity(name, label, "file", _short_repo(repo) if repo else "", commit, "", False, path)
    return None


def identify(path: str, version: str | None, direct_url: dict | None = None,
             env: dict[str, str] | None = None) -> ImplIdentity:
    """Name the implementation whose ``sglang`` package is at ``path`` (see the module docstring)."""
    env = os.environ if env is None else env
    for found in (from_git(path) if path else None, from_file(path) if path else None,
                  from_env(env.get(ENV, ""), path), from_direct_url(direct_url, path)):
        if found is not None:
            return found
    return ImplIdentity("", f"sglang {version}", "version", path=path)
