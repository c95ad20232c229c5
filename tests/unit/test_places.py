"""Where the suite looks for SGLang's kernels, held to the installed SGLang: a place the families' tables
(``families/<family>/places.py``) say this release keeps (``Place.seen``) is there, the backends and the static
tier take their places from those tables only, and each static-tier reference names a place the installed release
has. A misspelled module or name would otherwise read *absent* in every release: a skip hiding our own typo."""

from importlib.metadata import PackageNotFoundError, version

import pytest

import importlib.util

from ddtree_compat.backends import registry
from ddtree_compat.contract.places import Place, _defines
from ddtree_compat.records import FAMILIES
from ddtree_compat.static import kernels as static_kernels

try:
    INSTALLED = version("sglang")
except PackageNotFoundError:
    INSTALLED = None
BUILTINS = registry.resolve([name for name in registry.BUILTIN if name != "oracle"])
TABLES = {f"{family}.{name}": value for family in FAMILIES
          if importlib.util.find_spec(f"ddtree_compat.families.{family}.places")
          for name, value in vars(importlib.import_module(f"ddtree_compat.families.{family}.places")).items()
          if isinstance(value, tuple) and value and all(isinstance(p, Place) for p in value)}
"""Every place tuple of the families' ``places.py`` (the SGLang kernels' tables), by ``family.NAME``."""
WRITTEN = {place for places in TABLES.values() for place in places}
PLACES = sorted({(table, place) for table, places in TABLES.items() for place in places}, key=str)
KEPT = [(t, p) for t, p in PLACES if INSTALLED and p.kept_in(INSTALLED)]
STATIC = [entry for entry in vars(static_kernels).values()
          if isinstance(getattr(entry, "fn", getattr(entry, "loader", None)), tuple)]
needs_sglang = pytest.mark.skipif(INSTALLED is None, reason="sglang is not installed: no release to hold the "
                                  "places to (bash scripts/setup.sh installs 0.5.23)")


@pytest.mark.parametrize("table, place", PLACES, ids=lambda x: str(x))
def test_every_place_says_where_it_was_seen(table, place):
    assert place.seen.strip(), f"{table}: {place} names no release or tree that keeps it"


@pytest.mark.parametrize("backend", BUILTINS, ids=lambda b: b.name)
def test_a_backend_takes_its_places_from_the_families_tables(backend):
    """Each SGLang kernel place is written once, in its family's ``places.py``: a backend's declaration only
    refers to those tables (a place written in a backend again would drift from the static tier's)."""
    stray = [(impl.kernel, str(p)) for impl in backend.implements for p in impl.places if p not in WRITTEN]
    assert not stray, f"{backend.name}: places not from families/*/places.py: {stray}"


@pytest.mark.parametrize("entry", STATIC, ids=lambda e: e.kernel)
def test_the_static_tier_takes_its_places_from_the_families_tables(entry):
    places = getattr(entry, "fn", None) or entry.loader
    assert set(places) <= WRITTEN, f"{entry.kernel}: {places} not from families/*/places.py"


@needs_sglang
def test_the_installed_release_is_named_by_some_place():
    assert KEPT, f"no place of {len(PLACES)} says sglang {INSTALLED} keeps it (Place.seen)"


@needs_sglang
@pytest.mark.parametrize("table, place", KEPT or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no place names the installed release"))], ids=lambda x: str(x))
def test_a_place_said_kept_in_the_installed_release_is_there(table, place):
    assert _defines(place.module, place.name) is True, (
        f"{table}: {place} is said to be kept in sglang {INSTALLED} ({place.seen!r}), but its module "
        "is missing or does not define that name")


@needs_sglang
@pytest.mark.parametrize("entry", STATIC, ids=lambda e: e.kernel)
def test_a_static_reference_names_a_place_the_installed_release_has(entry):
    places = getattr(entry, "fn", None) or entry.loader
    assert any(_defines(p.module, p.name) for p in places), f"{entry.kernel}: none of {places} in sglang {INSTALLED}"


def test_kept_in_reads_releases_ranges_and_later():
    seen = Place("m", "n", seen="0.5.15-0.5.20, 0.5.22+, dbguo")
    assert [seen.kept_in(r) for r in ("0.5.12", "0.5.15", "0.5.20", "0.5.21", "0.5.22", "0.5.30", "dbguo")] == [
        False, True, True, False, True, True, False]
    assert Place("m", "n", seen="0.5.12").kept_in("0.5.12") and not Place("m", "n", seen="DDTree trees").kept_in("0.5.12")


def test_a_place_whose_module_lacks_a_dependency_says_where_installing_is_explained(tmp_path, monkeypatch):
    """A module that imports one not installed here (torchvision for SGLang's KV-cache modules) is a skip reason naming
    the module and pointing to docs/installing.md; a module that is itself absent is looked past, not a reason."""
    from ddtree_compat.contract.places import MissingDependency, locate

    (tmp_path / "needs_absent_dep.py").write_text("import no_such_dependency_xyz\n\ndef kernel():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependency) as e:
        locate((Place("needs_absent_dep", "kernel", "wrapper", "0.5.23"),))
    assert str(e.value) == ("cannot import needs_absent_dep: ModuleNotFoundError: No module named "
                            "'no_such_dependency_xyz' (docs/installing.md: which package, what it enables, where it "
                            "installs)")
    with pytest.raises(MissingDependency) as again:  # an absent module first: looked past, the other one is the reason
        locate((Place("no_such_module_xyz", "kernel", "wrapper", "0.5.24"),
                Place("needs_absent_dep", "kernel", "wrapper", "0.5.23")))
    assert str(again.value) == str(e.value)
