"""Write ddtree_compat/grid_index.json: each verify-grid group's case count, per profile, in grid order (what
``replay <case id>`` needs to build one group of the grid instead of all of it; ddtree_compat/case_lookup.py).

    python scripts/gen_grid_index.py                    # rewrite it (every profile with a verify grid: ~3 min on 2 cores)
    python scripts/gen_grid_index.py --check [PROFILE]  # exit 1 if out of date (the unit tests check `default`,
                                                        # .ci/run checks `full`)
"""

import json
import sys
from pathlib import Path

from ddtree_compat.case_lookup import INDEX_FILE, compute_index
from ddtree_compat.families.verify.records import PROFILES

PATH = Path(__file__).resolve().parent.parent / "ddtree_compat" / INDEX_FILE


def render(rows: dict) -> str:
    lines = ",\n".join(f'  "{p}": [\n' + ",\n".join("    " + json.dumps(list(r)) for r in rs) + "\n  ]"
                       for p, rs in rows.items())
    return "{\n" + lines + "\n}\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        profiles = argv[1:] or list(PROFILES)
        shipped = json.loads(PATH.read_text())
        stale = [p for p in profiles if [tuple(r) for r in shipped.get(p, [])] != compute_index(p)]
        if stale:
            print(f"{PATH} is out of date for {', '.join(stale)}: run python scripts/gen_grid_index.py", file=sys.stderr)
            return 1
        return 0
    rows = {p: compute_index(p) for p in PROFILES}
    PATH.write_text(render({p: r for p, r in rows.items() if r}))  # `scale` has no verify grid: no entry
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
