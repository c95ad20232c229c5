"""The known-issues manifest: parsing, matching, and strict xfail in real pytest sessions, both ways."""

import json
import subprocess
import sys

import pytest

from ddtree_compat import known_issues
from ddtree_compat.families.verify.records import make_case
from ddtree_compat.errors import KnownIssuesError

MANIFEST = """
[[issue]]
id = "zero-accept-b8"
arch = ["interpret"]
backend = ["mutant-zero-*"]
budget = [8]
topology = ["spine"]
reason = "planted: the mutant accepts nothing"
source = "https://example.org/issues/1"

[[issue]]
id = "oracle-b8"
arch = ["interpret"]
backend = ["oracle"]
budget = [8]
reason = "planted on a backend that passes: must show as XPASS(strict)"
source = "https://example.org/issues/2"
"""


def test_shipped_manifest_holds_the_field_report():
    m = known_issues.load()
    issue = m.match("sm120", "sglang-cuda", 8, "spine")
    assert issue is not None and issue.id == "sm120-spine-b8-b12" and issue.source.startswith("https://")
    assert m.match("sm120", "sglang-triton", 12, "spine") is issue
    assert m.match("sm121", "sglang-cuda", 8, "spine") is None  # exact arch, never >=
    assert m.match("sm120", "sglang-cuda", 15, "spine") is None  # 15, 16, 32, 64 work in the field
    assert m.match("sm120", "oracle", 8, "spine") is None


def test_families_globs_and_open_keys(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('[[issue]]\nid = "rtx"\narch = ["blackwell-rtx"]\ntopology = ["bf-*"]\n'
                 'reason = "r"\nsource = "https://example.org"\n')
    m = known_issues.load(p)
    assert m.match("sm121", "anything", 99, "bf-flat").id == "rtx"
    assert m.match("sm121", "anything", 99, "spine") is None
    assert m.match("sm100", "anything", 99, "bf-flat") is None
    assert m.match("interpret", "anything", 99, "bf-flat") is None
    assert known_issues.load("").issues == ()


@pytest.mark.parametrize("text, field", [
    ("[[issue]]\nid = 'a'\nreason = 'r'\n", "source"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'example.org'\n", "source"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\narch = ['sm12x']\n", "arch"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\nbudget = ['8']\n", "budget"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\ntopology = ['spiral']\n", "topology"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\nbackend = 'oracle'\n", "backend"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\nbudgets = [8]\n", "budgets"),
    ("[[issue]]\nid = 'A B'\nreason = 'r'\nsource = 'https://x'\n", "id"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\n[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\n",
     "id"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\nsources = { 'b*' = 'example.org' }\n", "sources"),
    ("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://x'\nsources = ['https://y']\n", "sources"),
    ("issue = 3\n", "issue"),
    ("[[issues]]\nid = 'a'\n", "issues"),
    ("id = \n", "toml"),
])
def test_malformed_manifests_name_the_field(tmp_path, text, field):
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(KnownIssuesError, match=f"field '{field}'.*allowed: "):
        known_issues.load(p)


def test_an_entry_covering_two_builds_links_each_backends_cells_to_its_own_code(tmp_path):
    """``sources``: the cells of a backend matching a glob there link to that build's code (the xfail reason, the
    results' env line, the report's known-issue table); other backends keep ``source``."""
    from ddtree_compat.report.summary import known_rows, summarize
    from ddtree_compat.results import ResultRecord, Results

    p = tmp_path / "m.toml"
    p.write_text("[[issue]]\nid = 'a'\nreason = 'r'\nsource = 'https://new/x.py'\nbackend = ['impl-*']\n"
                 "sources = { 'impl-old*' = 'https://old/y.py' }\n")
    manifest = known_issues.load(p)
    (issue,) = manifest.issues
    assert issue.describe("impl-old-1234").endswith("(https://old/y.py)")
    assert issue.describe("impl-new-5678").endswith("(https://new/x.py)")
    env = {"kind": "env", "env_id": "e", "known_issues": manifest.as_env()}
    assert env["known_issues"]["a"]["sources"] == {"impl-old*": "https://old/y.py"}
    cells = [ResultRecord(kernel="ddtree_follow", tier="interpret", backend=b, arch="interpret", case_id="c",
                          outcome="wrong", known_issue="a", env_id="e", nodeid=b)
             for b in ("impl-old-1234", "impl-new-5678")]
    s = summarize(Results(envs={"e": env}, records=cells))
    assert {row[1]: row[-1] for row in known_rows(s)} == {
        "impl-new-5678:ddtree_follow · interpret": "https://new/x.py",
        "impl-old-1234:ddtree_follow · interpret": "https://old/y.py"}


def test_strict_xfail_both_ways_and_recorded(pytester, verify_suite):
    (pytester.path / "m.toml").write_text(MANIFEST)
    b12 = make_case(12, "spine", "deep", 1).save(pytester.path / "cases")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--ddtree-tier=interpret", "-rxX",
        "--ddtree-case", str(verify_suite), "--ddtree-case", str(b12),
        "--ddtree-backend=ddtree_compat.families.verify.variants:ZeroAccept", "--ddtree-backend=oracle",
        "--ddtree-known-issues=m.toml", "--ddtree-results=r.jsonl")
    # mutant b8: known -> XFAIL; mutant b12: not covered -> fails; oracle b8: known but passes -> XPASS(strict)
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    result.stdout.fnmatch_lines(["[[]XPASS(strict)[]] known issue oracle-b8*(https://example.org/issues/2)",
                                 "grid cells: 2 pass, 0 wrong, 2 zero-accept (1 known issue: xfail), 0 fault, *",
                                 "known issues: 1 failed as expected (xfail), 1 passed (XPASS: *m.toml)",
                                 "XFAIL *interpret-mutant-zero-accept-b8-spine-deep-bs3*known issue zero-accept-b8* | "
                                 "replay: python -m ddtree_compat replay *"])
    lines = [json.loads(x) for x in (pytester.path / "r.jsonl").read_text().splitlines()]
    env = next(x for x in lines if x["kind"] == "env")
    assert env["known_issues"]["oracle-b8"]["source"] == "https://example.org/issues/2"
    got = {(x["backend"], x["budget"]): (x["outcome"], x["known_issue"]) for x in lines if x["kind"] == "result"}
    assert got == {("mutant-zero-accept", 8): ("zero-accept", "zero-accept-b8"),
                   ("mutant-zero-accept", 12): ("zero-accept", ""),
                   ("oracle", 8): ("pass", "oracle-b8"),
                   ("oracle", 12): ("pass", "")}
    report = subprocess.run([sys.executable, "-m", "ddtree_compat", "report", "r.jsonl"], cwd=pytester.path,
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    md = report.stdout
    assert "| zero-accept-b8 | mutant-zero-accept · interpret | xfail | yes | 1 |" in md
    assert "| oracle-b8 | oracle · interpret | xpass | yes | 1 |" in md and "(https://example.org/issues/2)" in md
    assert "🔶 1 xfail" in md and "⭐ 1 xpass" in md
    assert "## Failures (1)" in md  # only the uncovered b12 zero-accept


def test_shipped_entry_marks_sm120_cells_only(pytester, verify_suite, monkeypatch):
    monkeypatch.setenv("DDTREE_FAKE_GPUS", "sm120,sm121")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--ddtree-case", str(verify_suite),
                                           "--ddtree-results=r.jsonl")
    result.assert_outcomes(skipped=6)  # fake GPUs: nothing runs, but the marks are in place
    got = {(x["arch"], x["backend"]): x["known_issue"]
           for x in map(json.loads, (pytester.path / "r.jsonl").read_text().splitlines()) if x["kind"] == "result"}
    assert got == {("sm120", "oracle"): "", ("sm120", "sglang-triton"): "sm120-spine-b8-b12",
                   ("sm120", "sglang-cuda"): "sm120-spine-b8-b12", ("sm121", "oracle"): "",
                   ("sm121", "sglang-triton"): "", ("sm121", "sglang-cuda"): ""}


def test_bad_manifest_is_a_usage_error(pytester, verify_suite):
    (pytester.path / "m.toml").write_text(MANIFEST.replace('budget = [8]\ntopology', 'budget = [-8]\ntopology'))
    result = pytester.runpytest_subprocess("--ddtree-case", str(verify_suite), "--ddtree-known-issues=m.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*m.toml: issue zero-accept-b8: field 'budget' = [[]-8[]]*allowed: *integers >= 0*"])
    assert "Traceback" not in result.stderr.str()
