"""Finding a case by its id without building the whole grid: every record's cases stay findable, the
shipped index matches the grid, a stale index falls back to the whole grid."""

import json

import pytest

from ddtree_compat import case_lookup, records
from ddtree_compat.case_lookup import find
from ddtree_compat.contract import CaseContext
from ddtree_compat.families.verify.records import grid
from ddtree_compat.families.attention.records import PROFILES as ATTENTION_PROFILES


def test_the_shipped_index_matches_the_default_grid():
    """(``.ci/run`` checks the full profile's rows: ``scripts/gen_grid_index.py --check full``, ~3 min.)"""
    default, full = case_lookup.index()["default"], case_lookup.index()["full"]
    assert default == case_lookup.compute_index("default")
    assert len({r[:3] for r in full}) == len(full)
    assert sum(r[3] for r in full) > sum(r[3] for r in default)


def _samples():
    """Per record and attention profile: its first, middle and last case in the default run."""
    out = []
    for attention in ATTENTION_PROFILES:
        context = CaseContext("default", grid("default"), attention)
        for record in records.registry().values():
            cases = record.cases(context)
            out += [(record.name, c) for c in {cases[0].id: cases[0], cases[len(cases) // 2].id: cases[len(cases) // 2],
                                               cases[-1].id: cases[-1]}.values()]
    return out


def test_every_records_cases_are_found_by_id_without_the_whole_grid(monkeypatch):
    samples = _samples()  # built with the whole grid, before it is taken away
    assert {name for name, _ in samples} == set(records.registry())

    def no_grid(profile):
        raise AssertionError(f"the whole {profile} grid was built")

    monkeypatch.setattr(case_lookup, "grid", no_grid)
    for name, case in samples:
        assert find(case.id) == case, (name, case.id)
    assert find("b8-spine-nowhere-bs3") is None and find("zzz") is None


def test_a_stale_index_falls_back_to_the_whole_grid(monkeypatch, capsys):
    rows = [list(r) for r in case_lookup.index()["default"]]
    target = next(r for r in rows if r[:3] == [8, 16, "spine"])
    target[3] += 1  # the index says one case more than the grid has
    monkeypatch.setattr(case_lookup, "index", lambda: {"default": [tuple(r) for r in rows]})
    commit = next(c for c in records.get("move_kv").cases(CaseContext("default", grid("default")))
                  if c.verify.id == "b8-spine-deep-bs3")
    assert find(commit.id) == commit
    assert "does not match the default grid" in capsys.readouterr().err


def test_ids_name_their_group():
    assert case_lookup.group_of("b12-bf-peaked-sibling-bs8-blk8-cap16") == (12, 8, "bf-peaked")
    assert case_lookup.group_of("b8-spine-deep-bs3-p16-start-kv1x64fp16") == (8, 16, "spine")
    assert case_lookup.group_of("b8-k8-peaked-bs1") is None  # a DDTree case: not built on the grid


def test_the_index_file_is_json_of_every_profile():
    data = json.loads((case_lookup.resources.files("ddtree_compat") / case_lookup.INDEX_FILE).read_text())
    assert set(data) == {"default", "full"}


def test_cases_lists_a_kernels_ids_which_replay_finds(capsys):
    """``cases --kernel move_kv`` lists the commit cases (``cases`` alone lists the verify grid); ids listed
    are ids ``replay`` finds."""
    from ddtree_compat.cli import main

    assert main(["cases", "--kernel", "move_kv"]) == 0
    ids = capsys.readouterr().out.split()
    record = records.get("move_kv")
    assert ids == list(dict.fromkeys(c.id for c in record.cases(CaseContext("default", grid("default")))))
    assert "-kv" in ids[0] and find(ids[-1]).id == ids[-1]
