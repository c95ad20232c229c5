"""Where the suite looks for SGLang's kernels, held to the installed SGLang: a place the backends' tables
say this release keeps (``Place.seen``) is there, and each static-tier reference names a place it has. A
misspelled module or name would otherwise read *absent* in every release: a skip hiding our own typo."""

from importlib.metadata import PackageNotFoundError, version

import pytest

from ddtree_compat.backends import registry
from ddtree_compat.backends.sglang_locate import Place, _defines
from ddtree_compat.static import kernels as static_kernels

try:
    INSTALLED = version("sglang")
except PackageNotFoundError:
    INSTALLED = None
BUILTINS = registry.resolve([name for name in registry.BUILTIN if name != "oracle"])
PLACES = sorted({(backend.name, impl.kernel, place) for backend in BUILTINS for impl in backend.implements
                 for place in impl.places}, key=str)
KEPT = [(b, k, p) for b, k, p in PLACES if INSTALLED and p.kept_in(INSTALLED)]
STATIC = [entry for entry in vars(static_kernels).values()
          if isinstance(entry, static_kernels.TritonKernel) and entry.fn.startswith("sglang")]
needs_sglang = pytest.mark.skipif(INSTALLED is None, reason="sglang is not installed: no release to hold the "
                                  "places to (bash scripts/setup.sh installs 0.5.23)")


@pytest.mark.parametrize("backend, kernel, place", PLACES, ids=lambda x: str(x))
def test_every_place_says_where_it_was_seen(backend, kernel, place):
    assert place.seen.strip(), f"{backend} {kernel}: {place} names no release or tree that keeps it"


@needs_sglang
def test_the_installed_release_is_named_by_some_place():
    assert KEPT, f"no place of {len(PLACES)} says sglang {INSTALLED} keeps it (Place.seen)"


@needs_sglang
@pytest.mark.parametrize("backend, kernel, place", KEPT or [pytest.param(None, None, None, marks=pytest.mark.skip(
    reason="no place names the installed release"))], ids=lambda x: str(x))
def test_a_place_said_kept_in_the_installed_release_is_there(backend, kernel, place):
    assert _defines(place.module, place.name) is True, (
        f"{backend} {kernel}: {place} is said to be kept in sglang {INSTALLED} ({place.seen!r}), but its module "
        "is missing or does not define that name")


@needs_sglang
@pytest.mark.parametrize("entry", STATIC, ids=lambda e: e.kernel)
def test_a_static_reference_names_a_place_the_installed_release_has(entry):
    places = [Place(*alt.split(":", 1)) for alt in entry.fn.split("|")]
    assert any(_defines(p.module, p.name) for p in places), f"{entry.kernel}: none of {entry.fn} in sglang {INSTALLED}"


def test_kept_in_reads_releases_ranges_and_later():
    seen = Place("m", "n", seen="0.5.15-0.5.20, 0.5.22+, dbguo")
    assert [seen.kept_in(r) for r in ("0.5.12", "0.5.15", "0.5.20", "0.5.21", "0.5.22", "0.5.30", "dbguo")] == [
        False, True, True, False, True, True, False]
    assert Place("m", "n", seen="0.5.12").kept_in("0.5.12") and not Place("m", "n", seen="DDTree trees").kept_in("0.5.12")
