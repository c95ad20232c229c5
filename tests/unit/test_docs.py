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


def test_the_readme_has_two_set_up_commands_and_ci_runs_the_test_one():
    import re

    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    commands = [c for block in re.findall(r"```bash\n(.*?)```", setup, re.S) for c in block.splitlines()
                if "scripts/setup.sh" in c]
    assert commands == ["bash scripts/setup.sh && python -m ddtree_compat sweep",
                        "bash scripts/setup.sh && python -m pytest -n auto"]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()
