"""A sweep's files in its output folder: how each run is named, which earlier run ``--resume`` continues, and the
``latest-*`` links to the newest report.

One run writes ``<stem>.jsonl`` (the results), ``<stem>.md``, ``<stem>.html`` and ``<stem>.png`` (its report) and,
when a cell does not pass, ``<stem>-cases/``. Without ``--name`` the stem is ``<date>-<arch>-<profile>``, or the
first of ``<date>-<arch>-<profile>-2``, ``-3``, ... that no file of an earlier run holds: every run keeps its own
files. ``--name`` chooses the stem; a sweep refuses one an earlier run's files hold unless asked (``--replace``,
``--resume``, ``--append``). Once a default-named run has written its report, ``latest-<arch>-<profile>.jsonl``,
``.md``, ``.html`` and ``.png`` link to its files (relative symlinks; readers read a file and its link once).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SUFFIXES = (".jsonl", ".md", ".html", ".png")
"""A run's results file and its report, by suffix after the stem."""
CASES = "-cases"
"""After the stem: the folder of a run's failing cases."""


def files_of(out_dir: Path, stem: str) -> list[Path]:
    """Every file a run named ``stem`` may have: results, report, cases folder."""
    return [*(out_dir / f"{stem}{suffix}" for suffix in SUFFIXES), out_dir / f"{stem}{CASES}"]


def taken(out_dir: Path, stem: str) -> list[Path]:
    """The files of ``stem`` that exist (an earlier run's)."""
    return [p for p in files_of(out_dir, stem) if p.exists() or p.is_symlink()]


def default_stem(day: str, arch: str, profile: str) -> str:
    """``<date>-<arch>-<profile>``: ``2026-12-04-cpu-default``."""
    return f"{day}-{arch}-{profile}"


def fresh_stem(out_dir: Path, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``, ...: the first no file of an earlier run holds."""
    stem, n = base, 1
    while taken(out_dir, stem):
        n += 1
        stem = f"{base}-{n}"
    return stem


def newest_stem(out_dir: Path, arch: str, profile: str) -> str | None:
    """The newest default-named run of ``arch`` and ``profile`` in ``out_dir`` (by the date in its name, then its
    counter) that has a results file, or ``None``: what ``--resume`` and ``--append`` without ``--name`` continue,
    also after midnight."""
    pattern = re.compile(rf"(\d{{4}}-\d\d-\d\d)-{re.escape(arch)}-{re.escape(profile)}(?:-(\d+))?\.jsonl")
    runs = []
    for path in out_dir.glob("*.jsonl") if out_dir.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if match and not path.is_symlink():
            runs.append((match.group(1), int(match.group(2) or 1), path.name.removesuffix(".jsonl")))
    return max(runs)[2] if runs else None


def latest_name(arch: str, profile: str) -> str:
    """The stem of the links to the newest report of ``arch`` and ``profile``: ``latest-cpu-default``."""
    return f"latest-{arch}-{profile}"


def point_latest(out_dir: Path, stem: str, arch: str, profile: str) -> list[Path]:
    """Point ``latest-<arch>-<profile>.<suffix>`` at ``<stem>.<suffix>`` for each file the run has, and remove the
    links whose file it lacks (a run without a picture), so every link names the same run. Returns the links made.

    Raises:
        OSError: a link cannot be made (a file system without symlinks).
    """
    made = []
    for suffix in SUFFIXES:
        link = out_dir / f"{latest_name(arch, profile)}{suffix}"
        target = f"{stem}{suffix}"
        if (out_dir / target).is_file():
            staged = out_dir / f".{link.name}.new"
            staged.unlink(missing_ok=True)
            os.symlink(target, staged)
            os.replace(staged, link)  # the link changes in one step: a reader never finds none
            made.append(link)
        elif link.is_symlink():
            link.unlink()
    return made


def set_aside(out_dir: Path, stem: str) -> Path | None:
    """``--replace``: move an earlier run's files of ``stem`` into ``.<stem>.replaced/`` (put back by :func:`restore`
    when the new run writes nothing, removed by :func:`discard` once it has); ``None`` when there were none."""
    earlier = taken(out_dir, stem)
    if not earlier:
        return None
    aside = out_dir / f".{stem}.replaced"
    discard(aside if aside.is_dir() else None)  # left by a replacing run that was killed: its own files were older
    aside.mkdir()
    for path in earlier:
        path.rename(aside / path.name)
    return aside


def restore(aside: Path | None) -> None:
    """Put the files :func:`set_aside` moved back where they were (nothing ran: the earlier run stays)."""
    if aside is None:
        return
    for path in aside.iterdir():
        path.rename(aside.parent / path.name)
    aside.rmdir()


def discard(aside: Path | None) -> None:
    """Remove the files :func:`set_aside` moved (the new run has written its own)."""
    if aside is None:
        return
    import shutil

    shutil.rmtree(aside)
