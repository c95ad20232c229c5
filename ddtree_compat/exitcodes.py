"""Exit statuses of ``python -m ddtree_compat``: one table, the same for every subcommand (``sweep``,
``replay``, ``report``, ``diff``, ``cases``). ``docs/results.md`` shows it; ``tests/unit/test_bad_input.py``
holds every subcommand to it.

A ``sweep`` maps the exit status of each pytest process it starts onto this table
(:func:`from_pytest`), so pytest's own usage error (4) comes out as :attr:`Exit.USAGE` (2), like the CLI's.
Plain ``pytest`` keeps pytest's statuses.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Exit statuses (``int(Exit.USAGE) == 2``); what each means: :data:`TABLE`."""

    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_COMPARED = 3
    INTERNAL = 4
    NOTHING_RAN = 5
    INTERRUPTED = 130


TABLE: tuple[tuple[Exit, str], ...] = (
    (Exit.OK, "done: every cell that ran passed (skips are counted, never failures), the report was written, the "
              "gate found no regression, the cases were listed"),
    (Exit.FAILED, "a kernel cell failed (`wrong`, `zero-accept`, `fault`, `error`, a strict xpass), or the gate "
                  "found a regression"),
    (Exit.USAGE, "bad input, said in one line on stderr, naming the option or environment variable (an unknown "
                 "option value, backend, kernel, marker or case id; a malformed `-m` / `-k` expression; a file that "
                 "is not a case or results file; an output folder or results path that cannot be written; an "
                 "earlier sweep's `--name` without `--replace`): nothing was run, written or removed, and no "
                 "process is left"),
    (Exit.NOT_COMPARED, "`preflight`: nothing could be checked (every line NOT CHECKED); `diff`: no regression, but "
                        "not everything was compared (a backend · kernel · arch "
                        "ran on one side only, or no cell of a backend under test ran on both): the lines say "
                        "which and why (`ddtree_compat.gate`)"),
    (Exit.INTERNAL, "the suite itself broke (pytest's internal error, exit 3 there): a bug, report it with the "
                    "output"),
    (Exit.NOTHING_RAN, "nothing ran: no cell selected (`sweep -- -k nomatch`), or `replay`'s backend cannot run "
                       "the case here (the line says why; `--allow-skip` makes it 0)"),
    (Exit.INTERRUPTED, "interrupted (Ctrl-C): the results file keeps what finished, the report says it is partial; "
                       "`sweep --resume` runs the rest (the sweep prints the command)"),
)
"""Each status and what it means (``docs/results.md`` holds this table: :func:`markdown_table`)."""


def markdown_table() -> str:
    """:data:`TABLE` as the Markdown table in ``docs/results.md`` (a unit test keeps the two equal)."""
    rows = ["| exit | name | meaning |", "|---|---|---|"]
    rows += [f"| {int(e)} | `{e.name.lower()}` | {meaning} |" for e, meaning in TABLE]
    return "\n".join(rows) + "\n"


_PYTEST = {0: Exit.OK, 1: Exit.FAILED, 2: Exit.INTERRUPTED, 3: Exit.INTERNAL, 4: Exit.USAGE, 5: Exit.NOTHING_RAN}


def from_pytest(status: int) -> Exit:
    """The table's status for a pytest exit status (``0``..``5``; anything else, e.g. a killed process, is
    :attr:`Exit.INTERNAL`)."""
    return _PYTEST.get(status, Exit.INTERNAL)


_PRECEDENCE = (Exit.INTERRUPTED, Exit.USAGE, Exit.INTERNAL, Exit.FAILED, Exit.NOT_COMPARED, Exit.OK, Exit.NOTHING_RAN)


def combine(statuses) -> Exit:
    """One status for several runs (a sweep's tiers): the first of interrupted, usage, internal, failed, not
    compared, ok that any run has; :attr:`Exit.NOTHING_RAN` only when no run ran anything (or there was none)."""
    present = set(statuses)
    return next((s for s in _PRECEDENCE if s in present), Exit.NOTHING_RAN)
