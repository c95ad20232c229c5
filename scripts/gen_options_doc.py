"""Write docs/options.md from the plugin's option definitions (ddtree_compat/plugin/options.py).

    python scripts/gen_options_doc.py          # rewrite docs/options.md
    python scripts/gen_options_doc.py --check  # exit 1 if it is out of date (tests/unit/test_docs.py runs this)
"""

import sys
from pathlib import Path

from ddtree_compat.plugin.options import markdown_table

HEADER = """# Options (pytest)

Generated from `ddtree_compat/plugin/options.py` by `python scripts/gen_options_doc.py`; do not edit by hand.
Any of these (or an environment variable that sets its default) asks for the suite in a session; so do a
`-m` selection of its markers and a test asking for a ddtree fixture. Fault containment is pytest-xdist's
and pytest-timeout's: `-n N --max-worker-restart=K --timeout=S --timeout-method=thread` (the sweep passes
them). Property tests: `--hypothesis-profile ci|nightly` (40 derandomized examples, or 2,000).

"""


def render() -> str:
    return HEADER + markdown_table()


def main(argv: list[str]) -> int:
    path = Path(__file__).resolve().parent.parent / "docs" / "options.md"
    if "--check" in argv:
        if not path.exists() or path.read_text() != render():
            print(f"{path} is out of date: run python scripts/gen_options_doc.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(render())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
