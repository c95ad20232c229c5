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
