"""The cells' order (ddtree_compat.plugin.schedule): tests marked ``long`` start first, one at the head of
each xdist worker's share, checked against xdist's own work-stealing scheduler."""

import json
from types import SimpleNamespace

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from ddtree_compat.plugin.schedule import first_builds, long_first, shares

from .conftest import VERIFY_TEST


class _Node:
    """A stand-in worker: records the test indices the scheduler sends it."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def first_distribution(n: int, workers: int) -> list[list[int]]:
    """What xdist's worksteal scheduler sends each of ``workers`` idle workers first, for ``n`` tests."""
    config = SimpleNamespace(getvalue=lambda name: {"tx": [f"{workers}*popen"]}.get(name))
    sched = WorkStealingScheduling(config)
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, [f"t{i}" for i in range(n)])
    sched.schedule()
    return [node.sent for node in nodes]


@pytest.mark.parametrize("n,workers", [(18408, 14), (100, 3), (7, 7), (10, 4), (5, 8)])
def test_shares_are_the_contiguous_blocks_xdist_worksteal_sends_first(n, workers):
    sent = first_distribution(n, workers)
    assert [len(s) for s in sent] == shares(n, workers)
    start = 0
    for block in sent:  # contiguous, in worker order
        assert block == list(range(start, start + len(block)))
        start += len(block)


@pytest.mark.parametrize("n,workers,n_long", [(200, 14, 6), (200, 4, 9), (30, 3, 3), (12, 1, 2)])
def test_each_long_test_starts_a_share_and_the_others_keep_their_order(n, workers, n_long):
    items = [f"t{i}" for i in range(n)]
    long = set(items[-n_long:])  # collected last, as the static compiles and property tests are
    out = long_first(items, lambda i: i in long, workers)
    assert sorted(out) == sorted(items)
    assert [i for i in out if i not in long] == [i for i in items if i not in long]
    heads, start = [], 0
    for size in shares(n, workers):
        block = out[start:start + size]
        heads.append([i for i in block if i in long])
        assert block[:len(heads[-1])] == heads[-1], "a share's long tests come before its short ones"
        start += size
    counts = [len(h) for h in heads]
    assert sum(counts) == n_long and max(counts) - min(counts) <= 1, counts


@pytest.mark.parametrize("n,workers", [(200, 14), (200, 4), (60, 1)])
def test_the_serial_tests_run_together_in_order_at_the_head_of_one_share(n, workers):
    items = [f"t{i}" for i in range(n)]
    serial = items[40:50]  # collected mid-way, as the slice's deployment-shape cells are
    long = {items[5], items[-1]}  # one before them, one after
    out = long_first(items, lambda i: i in long, workers, lambda i: i in serial)
    assert sorted(out) == sorted(items)
    first = out.index(serial[0])
    assert out[first:first + len(serial)] == serial, "one block, in collection order"
    starts = [sum(shares(n, workers)[:k]) for k in range(workers)]
    assert out[0] == items[5], "the long tests are dealt as before, the first to the first share"
    if workers == 1:  # the long tests first, then the serial block
        assert out[:len(serial) + 2] == [items[5], items[-1], *serial]
    if workers > 2:  # the block is dealt after the two long tests: the third share's head
        assert out[starts[1]] == items[-1] and first == starts[2]
    rest = [i for i in out if i not in long and i not in serial]
    assert rest == [i for i in items if i not in long and i not in serial]


@pytest.mark.parametrize("n,workers,n_long", [(4, 14, 3), (2, 14, 2), (16, 14, 15)])
def test_a_collection_smaller_than_the_workers_keeps_every_test_once(n, workers, n_long):
    """A resume pass re-collects a few cells and the long tests for 14 workers: most shares are empty, and long
    tests dealt to empty shares leave fewer short tests than the other shares have room for (this raised
    StopIteration at collection, an INTERNALERROR of every worker, on the H100)."""
    items = [f"t{i}" for i in range(n)]
    long = set(items[:n_long])
    out = long_first(items, lambda i: i in long, workers, lambda i: i == items[-1])
    assert sorted(out) == sorted(items)


def test_no_long_test_keeps_the_order():
    items = list(range(10))
    assert long_first(items, lambda i: False, 4) == items


LONG_TEST = """
import pytest

@pytest.mark.long
def test_compile():
    pass
"""


def test_in_a_ddtree_session_the_long_test_is_collected_first(pytester, verify_suite):
    pytester.makepyfile(test_z_long=LONG_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=",
                                           "--ddtree-static=off", "--ddtree-case", str(verify_suite),
                                           "--collect-only", "-q")
    ids = [ln for ln in result.outlines if "::" in ln]
    assert ids and ids[0].endswith("test_z_long.py::test_compile"), ids
    assert len(ids) > 1


def test_a_session_that_did_not_ask_keeps_pytests_order(pytester):
    pytester.makepyfile(test_a="def test_first():\n    pass\n", test_z_long=LONG_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    ids = [ln for ln in result.outlines if "::" in ln]
    assert ids == ["test_a.py::test_first", "test_z_long.py::test_compile"]


ORDER_PROBE = """
import json
import pathlib


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker:
        pathlib.Path(f"order-{worker}.json").write_text(json.dumps([i.nodeid for i in session.items]))
"""

TWO_LONG_TESTS = """
import pytest

@pytest.mark.long
def test_compile_a():
    pass

@pytest.mark.long
def test_compile_b():
    pass
"""


def test_under_xdist_each_worker_puts_one_long_test_at_the_head_of_each_share(pytester, verify_suite):
    pytester.makepyfile(test_z_long=TWO_LONG_TESTS)
    pytester.makeconftest(ORDER_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-tier=interpret", "--ddtree-results=",
                                           "--ddtree-static=off", "--ddtree-case", str(verify_suite), "-n", "2")
    assert result.ret == 0
    orders = [json.loads((pytester.path / f"order-gw{i}.json").read_text()) for i in range(2)]
    assert orders[0] == orders[1], "every worker collects the same order (xdist aborts otherwise)"
    order = orders[0]
    first, second = 0, shares(len(order), 2)[0]
    assert order[first].endswith("test_z_long.py::test_compile_a"), order
    assert order[second].endswith("test_z_long.py::test_compile_b"), order


def _cell(tier: str, backend, vocab: int, kernel: str = "tree_speculative_sampling"):
    """A stand-in collected cell: the parameters the plugin gives a sampling test."""
    from ddtree_compat.families.sampling.records import SamplingCase
    from ddtree_compat.tiers import Target

    target = Target(tier, "cuda:0" if tier == "device" else "cpu", "sm90" if tier == "device" else None)
    case = SamplingCase("tree", "exact", "chain", 3, "onehot", vocab=vocab)
    return SimpleNamespace(callspec=SimpleNamespace(params={
        "ddtree_target": target, "ddtree_backend": backend, "ddtree_kernel": kernel, "ddtree_sampling_case": case}))


def test_the_first_device_cell_of_each_jit_build_is_started_first():
    """SGLang's tree sampler builds one JIT module per gcd(4, V): the first device cell of each (V 1024 and 16
    share one) is long; a second cell of a build, another tier's cells and a kernel built ahead of time are not."""
    from ddtree_compat.backends.sglang_cuda import SGLangCudaBackend
    from ddtree_compat.backends.sglang_triton import SGLangTritonBackend

    cuda, triton = SGLangCudaBackend(), SGLangTritonBackend()
    items = [_cell("device", cuda, 1024), _cell("device", cuda, 16), _cell("device", cuda, 18),
             _cell("device", cuda, 17), _cell("device", cuda, 4100), _cell("interpret", cuda, 18),
             _cell("device", triton, 17, "chain_speculative_sampling")]
    assert first_builds(items) == {id(items[0]), id(items[2]), id(items[3])}
    assert first_builds(items[1:]) == {id(items[1]), id(items[2]), id(items[3])}
