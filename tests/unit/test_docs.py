"""Docs generated from code stay in step with it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_options_doc_is_generated_from_the_option_definitions():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_options_doc.py"), "--check"], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert "--ddtree-impl" in (ROOT / "docs" / "options.md").read_text()


def test_the_exit_status_table_in_the_docs_is_the_code_s():
    from ddtree_compat.exitcodes import markdown_table

    assert markdown_table() in (ROOT / "docs" / "results.md").read_text()


def test_the_readme_has_two_set_up_commands_and_ci_runs_both():
    import re

    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    commands = [c for block in re.findall(r"```bash\n(.*?)```", setup, re.S) for c in block.splitlines()
                if "scripts/setup.sh" in c]
    assert commands == ["bash scripts/setup.sh && python -m ddtree_compat sweep",
                        "bash scripts/setup.sh && python -m pytest -n auto"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci  # the test command, as the README writes it
    assert "python -m ddtree_compat sweep" in ci  # and the main job: the kernel cells the test command leaves to it


LIVE_DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
"""The docs that describe the code as it is: README.md and every page of the manual (the results archive keeps the
commands its runs ran)."""


def _named_paths(text: str) -> set[str]:
    import re

    text = re.sub(r"group `ddtree_compat\.\w+`", "", text)  # entry-point groups, not modules
    paths = set(re.findall(r"(?<![\w/.-])((?:ddtree_compat|tests|scripts|benchmarks|docs)/[\w./-]*\w)", text))
    modules = set(re.findall(r"(?<![\w.])(ddtree_compat(?:\.\w+)+)", text))
    return paths | {m.replace(".", "/") for m in modules}


def _exists(named: str) -> bool:
    here = ROOT / named
    if here.exists() or here.with_suffix(".py").exists() or (here.parent.with_suffix(".py")).exists():
        return True  # a path, a module, or a module's attribute (ddtree_compat.records.registry)
    if any(here.parent.glob(here.name + ".*")):
        return True  # a stem of several files (docs/results/NAME.{jsonl.gz,md,html})
    return named.startswith("ddtree_compat/kernel_tests") and (ROOT / named.replace("ddtree_compat/kernel_tests",
                                                                                    "tests/kernels")).exists()


ARCH_LISTS = (("docs/tiers.md", "compiled ahead of time, on the CPU, for", "STATIC_ARCHES"),
              ("docs/tiers.md", "Each case also runs with the tile choice SGLang makes for", "TILE_ARCHES"),
              ("docs/verify-attention.md", "under the tile choices SGLang makes for", "TILE_ARCHES"))
"""Sentences of the docs that list the archs a column of the arch table selects: ``(doc, the words before the list,
the name in ddtree_compat.arch)``."""


def test_the_arch_lists_in_the_docs_are_the_arch_table_s():
    """Adding an arch is a row of ``ARCHES``; the docs that list the static targets and the emulated tile choices
    say the same, or this names the sentence to edit."""
    import re

    from ddtree_compat import arch

    for doc, before, name in ARCH_LISTS:
        text = " ".join((ROOT / doc).read_text().split())
        at = text.index(before) + len(before)
        listed = re.match(r"((?:\s*(?:,|and)?\s*sm\d+)+)", text[at:]).group(1)
        assert tuple(re.findall(r"sm\d+", listed)) == getattr(arch, name), (
            f"{doc}: the archs after '{before}' are not ddtree_compat.arch.{name} {getattr(arch, name)}")


def test_the_deployment_shapes_doc_names_every_scale_kernel_and_its_tag():
    """``docs/deployment-shapes.md`` lists each kernel with scale cells and its case-id tag."""
    from ddtree_compat.families.scale.boundaries import KERNELS
    from ddtree_compat.families.scale.records import TAGS

    section = (ROOT / "docs" / "deployment-shapes.md").read_text()
    missing = [f"`{k}`" for k in KERNELS if f"`{k}`" not in section] + [f"`{TAGS[k]}-`" for k in KERNELS
                                                                        if f"`{TAGS[k]}-`" not in section]
    assert not missing, f"docs/deployment-shapes.md: add {', '.join(missing)}"


def test_every_path_and_module_the_docs_name_exists():
    """A doc that names a file, folder or module the code no longer has is a stale map."""
    stale = {doc: sorted(n for n in _named_paths((ROOT / doc).read_text()) if not _exists(n)) for doc in LIVE_DOCS}
    assert not {d: s for d, s in stale.items() if s}, stale


def _top_names(path):
    """The names a module's file defines at its top (functions, classes, assignments, imports), read, not imported."""
    import ast

    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _module_file(dotted: str):
    """The file of a dotted module name of this checkout (``ddtree_compat.kernel_tests`` is ``tests/kernels``)."""
    rel = dotted.replace("ddtree_compat.kernel_tests", "tests.kernels", 1).split(".")
    base = ROOT.joinpath(*rel)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _resolves(dotted: str) -> bool:
    """``pkg.module[.Name[.attr]]``: the longest prefix that is a module of this checkout, and the next name defined
    at its top (a class's attribute past it is not followed)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            return cut == len(parts) or parts[cut] in _top_names(path) or (
                path.name == "__init__.py" and _module_file(".".join(parts[:cut + 1])) is not None)
    return False


def _cited(text: str) -> set[str]:
    """Dotted names a docstring or comment cites: absolute ``ddtree_compat.x.y`` and Sphinx roles (``:mod:`.x```)."""
    import re

    text = re.sub(r"group (?:``)?ddtree_compat\.\w+", "", text)  # entry-point groups, not modules
    absolute = set(re.findall(r"(?<![\w./])(ddtree_compat(?:\.\w+)+)", text))
    roles = set(re.findall(r":(?:mod|func|class|meth|data|attr|exc):`~?([.\w]+)`", text))
    return absolute | roles


def _prose(path) -> str:
    """A module's docstrings (every bare string statement: module, class, function and attribute docstrings) and
    comments, without its code and other string literals."""
    import ast
    import io
    import tokenize

    source = path.read_text()
    docs = [n.value.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    comments = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    return "\n".join(docs + comments)


def test_every_module_a_docstring_or_comment_names_exists():
    """A docstring or comment of the package that cites a module (or a name in one) the code no longer has is a stale
    map: absolute names (``ddtree_compat.backends.sglang_locate``) and Sphinx roles, relative ones (``:mod:`.server```)
    looked up from the citing module up through its packages."""
    import re

    stale = {}
    for path in sorted((ROOT / "ddtree_compat").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = _prose(path)
        for name in _cited(text):
            if name.startswith("."):
                bases = module.split(".")
                candidates = [".".join(bases[:i] + [name.lstrip(".")]) for i in range(len(bases), 0, -1)]
            elif name.startswith("ddtree_compat"):
                candidates = [name]
            else:  # a role naming a bare name (:func:`check`): this module's, or another package's (torch): not ours
                candidates = [f"{module}.{name}"] if re.fullmatch(r"\w+", name) else []
                if candidates and not _resolves(candidates[0]):
                    candidates = []  # an outside name (torch, triton): not ours to check
                    continue
            if candidates and not any(_resolves(c) for c in candidates):
                stale.setdefault(str(path.relative_to(ROOT)), []).append(name)
        for folder in re.findall(r"``(\w+)/``", text) if path.name == "__init__.py" else ():  # a package's map
            if not any((base / folder).is_dir() for base in (path.parent, ROOT / "ddtree_compat", ROOT)):
                stale.setdefault(str(path.relative_to(ROOT)), []).append(f"{folder}/")
    assert not stale, stale


GLOSSARY = ROOT / "docs" / "glossary.md"

PRINTED_JARGON = {
    "plant": "plant", "spine": "spine", "probe": "probe", "cascade": "cascade", "envelope": "envelope",
    "oracle": "oracle", "canary band": "canary", "poison": "poison", "replay": "replay", "known issue": "known issue",
    "distribution cell": "distribution cell", "law": "law", "recurrent state": "recurrent state", "gdn": "GDN",
    "live width": "live width", "capacity": "capacity", "budget": "budget", "layout": "layout", "lossless": "lossless",
    "baseline": "baseline", "candidate": "candidate", "regressed": "regressed", "newly covered": "newly covered",
    "accept length": "accept length", "tile choice": "tile choice", "emulated": "emulated", "top-k": "top-k",
    "specialization": "specialization", "sass": "SASS", "aot": "AOT", "torn": "torn", "partial": "partial",
    "phase": "phase", "sticky": "sticky", "manifest": "manifest", "strict": "strict", "xdist worker": "xdist worker",
    "upgrade gate": "upgrade gate", "deployment shape": "deployment-shape", "fault class": "class",
}
"""Words of the suite's own that its reports, failure messages and ``--help`` print: the glossary term -> the word as
printed (a string literal of ``ddtree_compat/``, docstrings left out, or its report template)."""
UNPRINTED_JARGON = ("arena", "carry", "standby")
"""Jargon the manual and the code's docstrings use that no message prints: defined all the same."""
PLAIN_COLUMNS = {"kernel", "cells", "cells run", "reason", "source", "issue", "shape", "case", "server", "attention",
                 "configuration", "concurrencies run", "env", "gpus", "cuda_visible_devices", "driver", "cuda", "torch",
                 "triton", "sglang", "flashinfer", "sgl-kernel", "host", "started"}
"""Report column headers that need no entry: plain words, and the versions and host of the environment table."""


def _glossary_terms() -> set[str]:
    """Every term the glossary defines: each ``**bold**`` span, lower-cased, backticks dropped."""
    import re

    return {t.strip().strip("`").lower() for t in re.findall(r"\*\*(.+?)\*\*", GLOSSARY.read_text())}


def _printed_strings() -> str:
    """The string literals of the package that are not docstrings (messages, report text, ``--help``), and the report
    templates."""
    import ast

    out = []
    for path in sorted((ROOT / "ddtree_compat").rglob("*.py")):
        tree = ast.parse(path.read_text())
        bodies = [n.body for n in ast.walk(tree) if isinstance(getattr(n, "body", None), list)]
        docs = {id(s.value) for body in bodies for s in body
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
        out += [n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
    out += [p.read_text() for p in sorted((ROOT / "ddtree_compat").rglob("*.j2"))]
    return "\n".join(out)


def _terms_the_reports_print() -> dict[str, set[str]]:
    """What the code names and a report or message prints, by where it comes from: outcomes, statuses, fault
    classes, tiers, backends, topologies, plants, layouts, profiles, and the reports' column headers."""
    import re

    from ddtree_compat import faults, outcomes, tiers
    from ddtree_compat.backends.registry import BUILTIN
    from ddtree_compat.cases import PLANTS
    from ddtree_compat.e2e.configs import PROFILES as E2E_PROFILES
    from ddtree_compat.families.attention.records import PROFILES as ATTENTION_PROFILES
    from ddtree_compat.families.ddtree import records as ddtree
    from ddtree_compat.families.linear.records import PROFILES as LINEAR_PROFILES
    from ddtree_compat.families.sampling.records import TOPOLOGIES as SAMPLING_TOPOLOGIES
    from ddtree_compat.families.verify.records import PROFILE_GRIDS
    from ddtree_compat.families.verify.topologies import TOPOLOGIES
    from ddtree_compat.report import deployment, summary

    from ddtree_compat import records

    headers = {"table"}
    for header in (summary.KNOWN_HEADER, summary.DISTRIBUTION_HEADER, summary.MATRIX_HEADER, summary.ENV_HEADER,
                   deployment.CONCURRENCY_HEADER, deployment.ENVELOPE_HEADER):
        for name in header:
            headers |= {re.sub(r"\s*\(.*?\)", "", part).strip().lower() for part in name.split(" · ")}
    return {
        "outcomes and statuses": {*outcomes.OUTCOMES, *outcomes.WORST_FIRST},
        "fault classes": set(faults.FAULT_CLASSES),
        "tiers": {*tiers.TIERS, tiers.STATIC, tiers.E2E},
        "backends": set(BUILTIN),
        "topologies": {*TOPOLOGIES, *SAMPLING_TOPOLOGIES, *(f"ddtree-{logits}" for logits in ddtree.LOGITS)},
        "plants": {*PLANTS, *ddtree.PLANTS},
        "layouts": {*ddtree.LAYOUTS, "cap16", "-prune"},
        "profiles": {*PROFILE_GRIDS, *E2E_PROFILES, *ATTENTION_PROFILES, *LINEAR_PROFILES},
        "report columns": headers - PLAIN_COLUMNS,
        "report tables": {*summary.TABLE_ORDER, *(r.table for r in records.registry().values())},
        "jargon": {*PRINTED_JARGON, *UNPRINTED_JARGON},
    }


def test_the_glossary_defines_every_term_the_reports_and_messages_print():
    """``docs/glossary.md`` (linked from every report's footer) defines each term a report or failure message prints:
    derived from the code, so a new outcome, fault class, tier, backend, topology, plant, layout, profile, report
    column or report table without an entry fails here; the suite's jargon is :data:`PRINTED_JARGON`, each word of it still printed."""
    import re

    defined = _glossary_terms()
    missing = {group: sorted(t for t in terms if t.lower() not in defined and t.lower().rstrip("s") not in defined)
               for group, terms in _terms_the_reports_print().items()}
    missing = {group: terms for group, terms in missing.items() if terms}
    assert not missing, f"docs/glossary.md: define (as **term**) {missing}"
    printed = _printed_strings()
    unprinted = [w for w in PRINTED_JARGON.values()
                 if not re.search(rf"(?<![\w-]){re.escape(w)}(?:e?s)?(?![\w-])", printed, re.I)]
    assert not unprinted, f"no message prints {unprinted} any more: move them from PRINTED_JARGON to UNPRINTED_JARGON"


def test_every_report_s_footer_points_to_the_glossary(tmp_path):
    """The Markdown and HTML reports end by naming ``docs/glossary.md``, a page of this checkout."""
    from ddtree_compat.report import render_html, render_markdown
    from ddtree_compat.report.coverage import GLOSSARY as NAMED
    from ddtree_compat.results import load

    assert (ROOT / NAMED).is_file()
    results = load([ROOT / "docs" / "results" / "2026-11-30-sm90-commit.jsonl.gz"])
    assert f"`{NAMED}`" in render_markdown(results).rstrip().splitlines()[-1]
    assert f"<code>{NAMED}</code>" in render_html(results, png=b"").split("<footer", 1)[1]


import re  # noqa: E402  (the tests below share these patterns)

PROCESS_WORDS = (r"\b(?:sessions?|calls?|stops?|leases?)\s+#?\d+", r"\bissues?\s+#?\d+",
                 r"\bruns?\s+\d+\b(?![.,]\d|\s+(?:of|times?|cells?|tests?|kernels?|servers?|workers?|requests?|s|min)"
                 r"\b)",
                 r"\(start\s+\d+")
"""How our own work process gets counted, which no reader of the product can know: ``session N``, ``call N``,
``issue N`` (or ``issue #N``), ``stop N``, ``lease N``, ``run N`` and ``(start N``, N a number, any case. Allowed: a
fact about another project, a number after its name or ``PR`` (``SGLang issue #9344``, ``vLLM #46560``, ``SGLang PR
#29907``, ``triton-lang/triton#9171``: a bare ``#N`` is not matched at all, colours and ``request #0`` being its
commoner use), and a count or a time (``runs 6 of 8 kernels``, ``run 2 times``, ``a first run 70.2 s``)."""
UPSTREAM = re.compile(r"(?:\bPR|\bpull|sglang|vllm|flashinfer|triton|pytorch|torch|sgl-kernel|cutlass|github|tvm-ffi|"
                      r"nvidia|cuda)[\w`' ]{0,12}$", re.I)
"""A project's name or ``PR`` just before the match: an upstream reference, allowed."""
PROCESS_SCANNED = ("README.md", "docs/*.md", "ddtree_compat/**/*", "scripts/**/*", "benchmarks/**/*", "tests/**/*",
                   ".ci/**/*", ".github/**/*", "conftest.py", "pyproject.toml")
"""Where the product speaks: the README, the manual (not ``docs/results/``, the archive of verbatim tool output), and
the code with its comments, docstrings and messages (not the captured server logs under ``tests/e2e/fixtures/``)."""


def _process_word_hits(path) -> list[str]:
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return []
    return [f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}"
            for n, line in enumerate(text.splitlines(), 1) for pattern in PROCESS_WORDS
            for m in re.finditer(pattern, line, re.I) if not UPSTREAM.search(line[:m.start()])]


def test_the_process_words_pattern_tells_our_counters_from_upstream_references():
    """Our counters are flagged, a project's own numbers and a count of things are not (the numbers are split off
    so that this file does not flag itself)."""
    ours = ["session " + "25", "Call " + "3", "issue " + "24", "issues #" + "19", "(start " + "1",
            "run " + "7 (2026-12-05)"]
    theirs = ["SGLang issue #" + "9344", "vLLM #" + "46560", "SGLang DDTree PR #" + "29907",
              "triton-lang/triton#" + "9171", "runs " + "6 of 8 kernels", "color: #" + "1a9850", "first run " + "70.2 s"]

    def flagged(s: str) -> bool:
        return any(not UPSTREAM.search(s[:m.start()]) for p in PROCESS_WORDS for m in re.finditer(p, s, re.I))

    assert [s for s in ours if not flagged(s)] == [] and [s for s in theirs if flagged(s)] == []


def test_the_product_speaks_of_the_product_not_of_our_work_process():
    """README, the manual and the code name a run by its date, GPU, command and results file, and a finding by what
    it found; never by a session, a device call or an issue number of our own (:data:`PROCESS_WORDS`)."""
    files = {p for pattern in PROCESS_SCANNED for p in ROOT.glob(pattern) if p.is_file()}
    files = [p for p in sorted(files) if not p.is_relative_to(ROOT / "tests" / "e2e" / "fixtures")
             and "__pycache__" not in p.parts and p.suffix not in (".gz", ".png", ".pyc", ".so", ".whl")]
    hits = [h for p in files for h in _process_word_hits(p)]
    assert not hits, "name the thing itself (the finding, the date and GPU, the results file):\n" + "\n".join(hits)
