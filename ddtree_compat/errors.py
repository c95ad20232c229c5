"""Errors for bad input: each names the field, the value and what is allowed, in one line.

The pytest plugin turns them into ``pytest.UsageError``; the CLI prints them and exits 2.
"""

from __future__ import annotations


class DDTreeInputError(ValueError):
    """A value given by the user (case file, option, results file) is not allowed.

    ``str(err)`` is one line: ``<where>: field '<field>' = <value!r>: <problem>; allowed: <allowed>``
    (``field '<field>' is missing: ...`` for a value of ``None``).
    """

    def __init__(self, field: str, value: object, allowed: str, problem: str = "not allowed", where: str = ""):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.problem = problem
        self.where = where
        prefix = f"{where}: " if where else ""
        given = "is missing" if value is None else f"= {value!r}"
        super().__init__(f"{prefix}field '{field}' {given}: {problem}; allowed: {allowed}")


class CaseError(DDTreeInputError):
    """A verify case (grid, hypothesis draw or JSON file) is malformed or out of range."""


class BackendError(DDTreeInputError):
    """A backend name or ``module:object`` spec cannot be resolved."""


class ArchError(DDTreeInputError):
    """An architecture name is not of the form ``sm{major}{minor}``."""


class ResultsFileError(DDTreeInputError):
    """A results file is not the JSONL this suite writes."""


class KnownIssuesError(DDTreeInputError):
    """The known-issues manifest (TOML) is unreadable or an entry is malformed."""
