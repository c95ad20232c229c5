"""The cells preflight runs itself (:class:`.plan.Cell`: deployment shapes, verify attention at the model's head
geometry), outside the sweep whose grids cannot take their shapes: :func:`run_cells` starts one child process
(``python -m ddtree_compat.preflight.cells SPEC``) that runs them in order, each on every selected backend
that implements its kernel, and appends one result line per cell to the sweep's results file (nodeid
``preflight::<concern>[<case id>]``, the verdict's key). A fault that poisons the child's CUDA context ends it;
a fresh child goes on with the next cell (each fault costs one process, as in the envelope's bisection).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULT = "DDTREE_PREFLIGHT_CELL "
"""The prefix of the child's line after each cell (its index), so the parent knows where to go on."""
RUNNING = "DDTREE_PREFLIGHT_RUNNING "
"""The prefix of the child's line before each kernel call (its coordinates): a child that dies in the call leaves
that cell to the parent, which records it as a ``fault``."""


def _backends(allowed: tuple[str, ...]):
    from .. import impls
    from ..backends.registry import resolve

    every = [b for b in resolve(None, impls.paths_from_env()) if b.name != "oracle"]  # the oracle judges, never answers
    return [b for b in every if not allowed or b.name in allowed]


def _child(spec_path: str) -> int:
    from .. import records
    from ..arch import detect_gpus
    from ..backends.registry import replay_spec
    from ..contract import AdapterError, base_name, kernels_of
    from ..isolation import is_sticky
    from ..plugin.cells import coordinates, unavailable_reason
    from ..results import ResultRecord, ResultsWriter, environment
    from ..tiers import enable_interpreter, resolve_tier, targets_for

    spec = json.loads(Path(spec_path).read_text())
    gpus = detect_gpus()
    tier = resolve_tier("auto", gpus)
    if tier == "interpret":
        enable_interpreter()
    target = targets_for(tier, gpus)[0]
    writer = ResultsWriter(spec["results"], environment(tier, "preflight"))
    backends = {}
    for index, cell in enumerate(spec["cells"]):
        if index < spec.get("start", 0):
            continue
        record = records.get(cell["record"])
        case = records.case_from_json(Path(cell["case"]).read_text(), cell["case"])
        allowed = tuple(cell.get("backends") or ())
        if allowed not in backends:
            backends[allowed] = _backends(allowed)
        poisoned = False
        for backend in backends[allowed]:
            if base_name(record.name) not in kernels_of(backend):
                continue
            cases = record.backend_cases(backend, (case,))
            if not cases:
                continue
            (run_case,) = cases
            label = record.label_of(run_case)
            coords = coordinates(target, backend, run_case, f"preflight::{cell['concern']}[{run_case.id}]", label)
            start = time.time()
            try:
                reason = unavailable_reason(backend, target, label, run_case)
            except AdapterError as e:
                reason, outcome, message = None, "error", f"the suite's adapter failed: {e}"
            else:
                outcome, message = "skip", reason or ""
            verdict = None
            if not reason and outcome != "error":
                print(RUNNING + json.dumps(coords), flush=True)
                verdict = record.runner()(run_case, backend, target)
                outcome, message = verdict.outcome, verdict.message
            case_path = ""
            if outcome not in ("pass", "skip"):  # a failing cell keeps its case file and its replay line
                Path(spec["cases_dir"]).mkdir(parents=True, exist_ok=True)
                case_path = str(run_case.save(spec["cases_dir"]))
                replay = records.replay_cli(case_path, replay_spec(backend), label, tier)
                message = f"{message}\nreplay: {replay}" if replay else message
            writer.write(ResultRecord(**coords, outcome=outcome, duration_s=time.time() - start,
                                      message=message[-2000:], fault_class=getattr(verdict, "fault_class", None),
                                      measured=getattr(verdict, "measured", None) or {}, case_path=case_path))
            if verdict is not None and outcome == "fault" and is_sticky(verdict.fault_class,
                                                                         verdict.context_poisoned):
                poisoned = True
                break
        print(f"{RESULT}{index}", flush=True)
        if poisoned:
            return 75  # the parent starts a fresh child at the next cell
    return 0


def run_cells(cells, results: Path, log, cases_dir: str, env: dict | None = None,
              failing_dir: str | None = None) -> int:
    """Run ``cells`` (``(Cell, backends)`` pairs) in child processes, their result lines appended to ``results``;
    the children's output to ``log`` (an open file); a failing cell's case file to ``failing_dir`` (default
    ``cases_dir``). Returns how many cells finished."""
    paths = []
    for cell, allowed in cells:
        path = cell.case.save(cases_dir)
        paths.append(dict(concern=cell.concern, record=cell.record, case=str(path), backends=list(allowed)))
    spec_path = Path(cases_dir) / "preflight-cells.json"
    done, start = 0, 0
    while start < len(paths):
        spec_path.write_text(json.dumps(dict(results=str(results), cells=paths, start=start,
                                             cases_dir=str(failing_dir or cases_dir))))
        proc = subprocess.Popen([sys.executable, "-m", "ddtree_compat.preflight.cells", str(spec_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        last, running = start - 1, None
        for line in proc.stdout:
            log.write(line)
            if line.startswith(RUNNING):
                running = json.loads(line[len(RUNNING):])
            elif line.startswith(RESULT):
                last, running = int(line[len(RESULT):]), None
                done += 1
        code = proc.wait()
        if code == 0:
            break
        if running is not None:  # the child died in a kernel call: that cell faulted
            _record_death(results, running, code)
            last += 1
        if last < start:  # it died before any cell (its log says why): the rest stay without a result line
            break
        start = last + 1
    log.flush()
    return done


def _record_death(results: Path, coords: dict, code: int) -> None:
    from ..results import ResultRecord, ResultsWriter, environment

    ResultsWriter(str(results), environment(coords.get("tier", ""), "preflight")).write(ResultRecord(
        **coords, outcome="fault", message=f"the process running this cell died (exit {code}) in the kernel call"))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(_child(sys.argv[1]))
