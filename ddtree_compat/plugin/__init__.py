"""The pytest plugin (entry point ``pytest11: ddtree_compat``), one module per job:

* :mod:`.options`: the ``--ddtree-*`` options, defined once;
* :mod:`.markers`: tier, arch and family markers, generated from the arch table;
* :mod:`.session`: the per-session :class:`~.session.Suite` and when it comes to exist (inert until
  asked: no option, marker selection or ddtree fixture, no change to the session);
* :mod:`.params`: parametrization of kernel cells from the kernel records;
* :mod:`.cells`: one :class:`~.cells.Cell` per test, the check every kernel cell goes through, and its
  fixtures (``ddtree_check``, ``ddtree_check_verify``, ``ddtree_check_commit``,
  ``ddtree_check_attention``, ``ddtree_check_run``);
* :mod:`.recording`: result lines;
* :mod:`.containment`: xdist hooks for crashed workers and resume;
* :mod:`.schedule`: the order the cells run in (tests marked ``long`` first, one per xdist worker);
* :mod:`.summary`: the terminal summary;
* :mod:`.progress`: the start lines (which backends run here, which skip and why) and progress lines;
* :mod:`.sanitizer`: ``--sanitize``;
* :mod:`.static`, :mod:`.e2e`: the static and end-to-end tiers' cells.

A test inside another repo needs only::

    def test_verify(ddtree_target, ddtree_backend, ddtree_case, ddtree_check_verify):
        ddtree_check_verify(ddtree_target, ddtree_backend, ddtree_case)
"""

from .markers import arch_marks  # noqa: F401 - for test modules that mark their own cells

pytest_plugins = (
    "ddtree_compat.plugin.options",
    "ddtree_compat.plugin.session",
    "ddtree_compat.plugin.cells",
    "ddtree_compat.plugin.params",
    "ddtree_compat.plugin.recording",
    "ddtree_compat.plugin.containment",
    "ddtree_compat.plugin.schedule",
    "ddtree_compat.plugin.summary",
    "ddtree_compat.plugin.progress",
    "ddtree_compat.plugin.static",
    "ddtree_compat.plugin.e2e",
)
"""In dependency order (a module listed after those it imports), so pytest can rewrite each one's asserts."""
