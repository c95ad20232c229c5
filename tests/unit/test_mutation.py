"""The mutation check of the suite itself: each bug of ``planted/planted_bugs.py`` (our oracle, commit plan,
attention reference, e2e expectation and judge, SGLang adapters, tile emulation, static signatures) is planted
alone, in a fresh pytest process and every process it starts, and each test aimed at it must fail. A test
that passes, skips or is not collected under its bug fails the check, and so does a bug that could not be
planted (what it breaks was renamed): so a check that cannot fail shows here, in CI.

Replay one: ``PLANTED_BUG=<name> PYTHONPATH=tests/unit/planted:. TRITON_INTERPRET=1 python -m pytest
<its tests>``.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.envs import locked, own_env
from tests.unit.planted.planted_bugs import BUGS, ENV, LOG_ENV

ROOT = Path(__file__).resolve().parents[2]
PLANTED = Path(__file__).with_name("planted")


def _outcomes(junit: Path) -> dict[str, str]:
    """Node id (``tests/unit/test_x.py::test_y[param]``) -> ``passed``, ``failed``, ``error`` or ``skipped``."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        path = module.replace(".", "/") + ".py"
        kinds = {child.tag for child in case}
        outcome = ("error" if "error" in kinds else "failed" if "failure" in kinds else
                   "skipped" if "skipped" in kinds else "passed")
        out[f"{path}::{name}"] = outcome
    return out


def _under(nodeid: str, named: str) -> bool:
    return nodeid == named or nodeid.startswith(named + "[")


def run_with(bug: str, tests: tuple[str, ...], tmp_path: Path,
             site: Path | None = None) -> tuple[dict[str, str], str, str]:
    """Run ``tests`` in a fresh pytest process with ``bug`` planted: ``(outcomes, planting log, output)``.
    The interpret tier is on (``TRITON_INTERPRET=1``, as CPU CI runs), the outer run's ``DDTREE_*`` off;
    ``site``, if given, goes on the path after the checkout."""
    env = own_env()
    log, junit = tmp_path / "planted.log", tmp_path / "junit.xml"
    path = [str(PLANTED), str(ROOT), *([str(site)] if site else []), env.get("PYTHONPATH", "")]
    env.update({ENV: bug, LOG_ENV: str(log), "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(path)})
    env.setdefault("OMP_NUM_THREADS", "1")  # one core each: these runs go side by side under xdist
    proc = subprocess.run([sys.executable, "-m", "pytest", *tests, "-p", "no:cacheprovider", "-q", "-p", "no:xdist",
                           "--junitxml", str(junit), "--ddtree-results", "", "--ddtree-cases-dir", str(tmp_path / "cases"),
                           "--ddtree-e2e-dir", str(tmp_path / "e2e")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = (proc.stdout + proc.stderr)[-3000:]
    outcomes = _outcomes(junit) if junit.exists() else {}
    return outcomes, log.read_text() if log.exists() else "", output


# The bug whose session also runs with a stand-in plugin distribution listing ``ddtree_compat`` on the path
# (assertion rewriting of the package): one session serves its own check and the rewriting check.
REWRITTEN = "eagle-walk-bonus-plus-one"


def stand_in_site(where: Path) -> Path:
    """A site folder with a pytest plugin that does nothing, whose distribution lists ``ddtree_compat``: pytest
    rewrites, and so loads itself, every module a pytest-plugin distribution lists among its files (a wheel
    install of this package; the egg-info ``pip wheel .`` leaves in the checkout; pytest 9.2 does it for an
    editable install too)."""
    site = where / "site"
    info = site / "stand_in_plugin-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (site / "stand_in_plugin.py").write_text('"""A pytest plugin that does nothing."""\n')
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: stand-in-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nstand_in = stand_in_plugin\n")
    (info / "RECORD").write_text("stand_in_plugin.py,,\nddtree_compat/__init__.py,,\n")
    return site


def planted_session(name: str, shared_tmp: Path) -> tuple[dict[str, str], str, str, str | None]:
    """``run_with`` of bug ``name`` on its tests (with the stand-in site for :data:`REWRITTEN`), run once per
    session: the first test that asks runs it (under a file lock, xdist workers included), the others read
    its outcomes, log and output back. Returns ``(outcomes, log, output, the stand-in site or None)``."""
    where = shared_tmp / "mutation" / name
    with locked(shared_tmp / "mutation" / f"{name}.lock"):
        saved = where / "session.json"
        if not saved.exists():
            where.mkdir(parents=True, exist_ok=True)
            site = stand_in_site(where) if name == REWRITTEN else None
            saved.write_text(json.dumps([*run_with(name, BUGS[name].tests, where, site=site),
                                         str(site) if site else None]))
        outcomes, log, output, site = json.loads(saved.read_text())
    return outcomes, log, output, site


@pytest.mark.parametrize("name", BUGS)
def test_planted_bug_fails_the_tests_aimed_at_it(name, shared_tmp):
    bug = BUGS[name]
    outcomes, log, output, _ = planted_session(name, shared_tmp)
    assert f"applied {name}" in log and "broken" not in log, f"{name} was not planted ({bug.module}): {log}\n{output}"
    for named in bug.tests:
        mine = {n: o for n, o in outcomes.items() if _under(n, named)}
        assert mine, f"{named} was not collected under {name}:\n{output}"
        assert any(o in ("failed", "error") for o in mine.values()), (
            f"planted bug {name!r} ({bug.what}) did not make {named} fail: {mine}\n{output}")


def test_without_a_bug_nothing_is_planted(tmp_path):
    """The hook is inert unless asked: the same run without ``PLANTED_BUG`` passes and logs nothing."""
    named = "tests/unit/test_harness.py::test_oracle_backend_passes"
    outcomes, log, output = run_with("", (named,), tmp_path)
    assert log == "" and outcomes and set(outcomes.values()) == {"passed"}, output


def test_a_bug_is_planted_under_assertion_rewriting(shared_tmp):
    """pytest rewrites, and so loads itself, every module that a distribution with a pytest plugin lists
    among its files (:func:`stand_in_site`). With a stand-in distribution listing ``ddtree_compat`` on the
    path the bug is planted all the same (the session :data:`REWRITTEN`'s own check runs)."""
    name = REWRITTEN
    outcomes, log, output, site = planted_session(name, shared_tmp)
    assert site and "ddtree_compat/__init__.py" in (Path(site) / "stand_in_plugin-0.dist-info" / "RECORD").read_text()
    assert f"applied {name}" in log, output
    assert outcomes and set(outcomes.values()) == {"failed"}, output


def test_every_bug_is_aimed_at_existing_tests():
    for bug in BUGS.values():
        for named in bug.tests:
            path, _, function = named.partition("::")
            assert f"def {function.split('[')[0]}(" in (ROOT / path).read_text(), (bug.name, named)


def test_every_sampling_skew_is_planted():
    from ddtree_compat.families.sampling import skews
    from tests.unit.planted.planted_bugs import SAMPLING_SKEWS

    assert set(SAMPLING_SKEWS) == set(skews.SKEWS)
