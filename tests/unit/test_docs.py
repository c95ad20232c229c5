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


LIVE_DOCS = ("README.md", "docs/architecture.md", "docs/extending.md", "docs/tiers.md", "docs/installing.md",
             "docs/ddtree-impls.md", "docs/results.md", "docs/e2e.md", "docs/verify-attention.md")
"""The docs that describe the code as it is (device-run records and results keep the commands they ran)."""


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


def test_every_path_and_module_the_docs_name_exists():
    """A doc that names a file, folder or module the code no longer has is a stale map."""
    stale = {doc: sorted(n for n in _named_paths((ROOT / doc).read_text()) if not _exists(n)) for doc in LIVE_DOCS}
    assert not {d: s for d, s in stale.items() if s}, stale
