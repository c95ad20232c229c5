import pytest

from ddtree_compat.cases import make_case

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
