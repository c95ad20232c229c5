"""The venvs the tests build see what the running interpreter sees (``tests/envs.py``), not the base
interpreter's packages: so the suite works from a virtualenv, the system interpreter and a user install."""

import json
import subprocess
import sys

from tests.envs import running_site_dirs, venv_over_running, venv_site_packages

PROBE = """
import json, sys, pytest, xdist, torch
print(json.dumps({"path": sys.path, "pytest": pytest.__file__, "xdist": xdist.__file__, "torch": torch.__file__,
                  "prefix": sys.prefix}))
"""


def test_a_venv_over_the_running_environment_sees_its_packages_and_no_others(tmp_path):
    import pytest
    import torch
    import xdist

    python = venv_over_running(tmp_path / "venv")
    probe = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout)
    assert seen["prefix"] == str(tmp_path / "venv")
    own = str(venv_site_packages(tmp_path / "venv"))
    path = seen["path"]
    assert own in path
    for d in running_site_dirs():  # every site dir of ours, after the venv's own
        assert d in path and path.index(d) > path.index(own), (d, path)
    for name, module in (("pytest", pytest), ("xdist", xdist), ("torch", torch)):
        assert seen[name] == module.__file__, (name, seen[name], module.__file__)
    # no site directory but the venv's own and ours: the base interpreter's stays out unless we see it too
    sites = [p for p in path if p.endswith(("site-packages", "dist-packages"))]
    assert set(sites) <= {own, *running_site_dirs()}, (sites, running_site_dirs())


BUILD_AND_PROBE = """
import site, subprocess, sys
from tests.envs import venv_over_running
python = venv_over_running(__import__("pathlib").Path(sys.argv[1]))
seen = subprocess.run([str(python), "-c", "import user_only_pkg; print(user_only_pkg.__file__)"],
                      capture_output=True, text=True)
print(site.ENABLE_USER_SITE, seen.returncode, seen.stdout.strip())
"""


def test_a_user_install_is_seen_when_the_running_interpreter_sees_it(tmp_path):
    """``pip install --user``: packages in the user site (here a stand-in under ``PYTHONUSERBASE``) are seen by
    the venvs built from an interpreter that sees them, and not by those built from one that does not (inside
    a virtualenv without system site-packages, where Python turns the user site off)."""
    import os
    from pathlib import Path

    userbase = tmp_path / "userbase"
    v = sys.version_info
    user_site = userbase / "lib" / f"python{v[0]}.{v[1]}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "user_only_pkg.py").write_text("")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONUSERBASE": str(userbase), "PYTHONPATH": str(root)}
    env.pop("PYTHONNOUSERSITE", None)
    run = subprocess.run([sys.executable, "-c", BUILD_AND_PROBE, str(tmp_path / "venv")], capture_output=True,
                         text=True, env=env, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr[-3000:]
    enabled, rc, *where = run.stdout.split()
    if enabled == "True":
        assert rc == "0" and where == [str(user_site / "user_only_pkg.py")], run.stdout
    else:
        assert enabled == "False" and rc != "0", run.stdout
