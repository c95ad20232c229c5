"""``--sanitize TOOL``: re-run a failing device cell under compute-sanitizer and attach its report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..backends.registry import replay_spec
from ..tiers import Target


def sanitize(tool: str, path: Path, backend, target: Target, kernel: str) -> tuple[str, str]:
    """Re-run the cell saved at ``path`` under ``compute-sanitizer --tool TOOL`` (the CLI's ``replay``, pinned
    to the cell's GPU); return ``(report path, one-line summary)``. A missing compute-sanitizer or a
    timeout (600 s) is said in the summary, never raised."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return "", f"{tool}: compute-sanitizer not found on PATH"
    report = path.with_name(f"{path.stem}.{backend.name}.{tool}.txt")
    cmd = [exe, "--tool", tool, "--error-exitcode", "99", sys.executable, "-m", "ddtree_compat", "replay", str(path),
           "--backend", replay_spec(backend), "--tier", target.tier, "--kernel", kernel]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": target.device.split(":")[-1]} if target.tier == "device" else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        text = f"timed out after {e.timeout}s\n{e.stdout or ''}"
    report.write_text(" ".join(cmd) + "\n\n" + text)
    summary = next((ln.strip() for ln in text.splitlines() if "ERROR SUMMARY" in ln), "no ERROR SUMMARY line")
    return str(report), f"{tool}: {summary} (report {report})"
