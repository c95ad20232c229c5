import pytest

from ddtree_compat.families.verify.records import make_case

VERIFY_TEST = """
def test_verify(ddtree_target, ddtree_backend, ddtree_case, ddtree_check_verify):
    ddtree_check_verify(ddtree_target, ddtree_backend, ddtree_case)
"""


@pytest.fixture(autouse=True)
def _clean_ddtree_env(monkeypatch):
    """Inner pytest sessions must not inherit the outer run's DDTREE_* settings (CI sets some)."""
    import os

    for name in [n for n in os.environ if n.startswith("DDTREE_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def verify_suite(pytester):
    """A pytester dir with a one-test kernel suite and one case file; returns the case path."""
    pytester.makepyfile(test_kernel=VERIFY_TEST)
    return make_case(8, "spine", "deep", 3).save(pytester.path / "cases")


@pytest.fixture
def sglang_missing():
    """``(places) -> reason | None`` for the tests that run SGLang's kernels: a reason only when SGLang is not
    installed, or a module the kernel's module imports is not (``MissingDependency``, naming it). A kernel the
    installed SGLang does not have at any of ``places`` raises ``Absent``: CI pins a release that has every
    one, so a place of ours is wrong (a test failure, never a skip); anything else raises too."""
    import importlib.util

    from ddtree_compat.contract.places import MissingDependency, locate

    def reason(places) -> str | None:
        if importlib.util.find_spec("sglang") is None:
            return "sglang is not installed"
        try:
            locate(places)
        except MissingDependency as e:
            return str(e)
        return None

    return reason
