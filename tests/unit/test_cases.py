"""Case generation, JSON round trip and bad input."""

import json
from dataclasses import replace

import pytest
from hypothesis import given


from ddtree_compat.families.verify import oracle

from ddtree_compat.families.verify import records as verify_records
from ddtree_compat.harness.buffers import POISON
from ddtree_compat.families.verify.checks import eagle_inputs, expected_outputs
from ddtree_compat.families.verify.records import VerifyCase, grid, make_case
from ddtree_compat.errors import CaseError
from ddtree_compat.families.verify.strategies import verify_cases

GRID = grid("default")


def test_grid_ids_are_unique_and_readable():
    ids = [c.id for c in GRID]
    assert len(ids) == len(set(ids))
    assert {"b8-spine-deep-bs3", "b12-spine-none-bs1", "b16-bf-peaked-sibling-bs8", "b8-spine-deep-bs3-cap16"} <= set(ids)


def test_grid_generates_only_valid_combinations():
    for c in GRID:
        c.check()
        if c.topology == "spine":
            assert c.budget <= c.block_size - 1
        if c.budget == 0:
            assert (c.topology, c.plant) == ("spine", "none")
        assert all(r.tree.max_depth <= c.block_size - 1 for r in c.requests)
    assert {c.mode for c in GRID} == {"spine", "tree"}
    assert {c.budget for c in GRID} == set(verify_records.PROFILE_GRIDS["default"].budgets)
    assert {c.batch for c in GRID} == {1, 3, 8}


def test_planted_acceptance_is_what_the_oracle_accepts():
    for c in GRID:
        results = c.expected()
        for r, res in zip(c.requests, results):
            n = res.accepted_drafts
            if c.plant == "none":
                assert n == 0, c.id
            elif c.plant == "first":
                assert n == 1, c.id
            elif c.plant == "partial":
                assert 2 <= n < r.tree.max_depth, c.id
            elif c.plant == "deep":
                assert n == r.tree.max_depth, c.id
            elif c.plant == "sibling":
                assert any(r.tree.children[r.tree.parents[node]][0] != node for node in res.path[1:]), c.id


def test_eagle_contract_matches_tree_walk_on_the_grid():
    """The two oracle statements (parent walk, EAGLE-link walk) agree on every grid case."""
    for c in GRID:
        want = expected_outputs(c)
        for b, res in enumerate(c.expected()):
            n = res.accepted_drafts
            assert want["accept_token_num"][b] == n
            assert want["accept_index"][b, : n + 1].tolist() == [b * c.slots + k for k in res.path]
            assert (want["accept_index"][b, n + 1:] == POISON).all()


@given(case=verify_cases())
def test_eagle_contract_matches_tree_walk_on_drawn_cases(case):
    want = expected_outputs(case)
    flat_target = eagle_inputs(case)["target_predict"].flatten()
    for b, res in enumerate(case.expected()):
        n = res.accepted_drafts
        assert int(want["accept_token_num"][b]) == n
        rows = [b * case.slots + k for k in res.path]
        assert want["accept_index"][b, : n + 1].tolist() == rows
        assert want["predicts"][rows].tolist() == flat_target[rows].tolist()


def test_json_round_trip_every_grid_case(tmp_path):
    for c in GRID[::7]:
        assert VerifyCase.from_json(c.to_json()) == c
    path = GRID[5].save(tmp_path)
    assert path.name == f"{GRID[5].id}.json"
    assert VerifyCase.load(path) == GRID[5]


def test_generation_is_deterministic():
    a = make_case(8, "random", "sibling", 3)
    b = make_case(8, "random", "sibling", 3)
    assert a == b and a.to_json() == b.to_json()


def _json(c, **changes):
    data = json.loads(c.to_json())
    data.update(changes)
    return json.dumps(data)


BASE = make_case(3, "balanced", "first", 1)


@pytest.mark.parametrize("changes, field", [
    ({"budget": -1}, "budget"),
    ({"topk_cap": 0}, "topk_cap"),
    ({"topology": "star"}, "topology"),
    ({"plant": "most"}, "plant"),
    ({"schema": "other/1"}, "schema"),
    ({"colour": 1}, "colour"),
    ({"capacity": 2}, "capacity"),
    ({"requests": [{"parents": [-1, 0, 3, 0], "tokens": [1, 2, 3, 4], "target_predict": [1, 2, 3, 4]}]},
     r"parents\[2\]"),
    ({"requests": [{"parents": [-1, 0, 0, 0], "tokens": [1, 2, 3, 5000], "target_predict": [1, 2, 3, 4]}]},
     "tokens"),
])
def test_bad_case_json_names_the_field(changes, field):
    with pytest.raises(CaseError, match=f"field '{field}'") as err:
        VerifyCase.from_json(_json(BASE, **changes))
    assert "allowed:" in str(err.value) and "\n" not in str(err.value)


def test_not_json_is_a_case_error():
    with pytest.raises(CaseError, match="not JSON"):
        VerifyCase.from_json("{nope")


def test_budget_and_tree_must_agree():
    with pytest.raises(CaseError, match="parents"):
        replace(BASE, budget=5).check()


def test_unknown_profile():
    with pytest.raises(CaseError, match="profile"):
        grid("huge")


def test_spine_oracle_tree_is_what_the_topology_emits():
    c = make_case(12, "spine", "deep", 1)
    assert c.requests[0].parents == tuple(range(-1, 12)) and c.mode == "spine"
    assert oracle.verify_greedy(c.requests[0].tree, c.requests[0].target_predict).accepted_drafts == 12
