"""The venvs the tests build see what the running interpreter sees (``tests/envs.py``), not the base
interpreter's packages: so the suite works from a virtualenv, the system interpreter and a user install."""

import json
import subprocess

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
