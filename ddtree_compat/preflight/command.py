"""``python -m ddtree_compat preflight [OPTIONS] -- <launch flags>``: read the configuration (:mod:`.launch`,
:mod:`.model`), plan its cells (:mod:`.plan`), run them as one sweep in a child (its results file and report
are the usual ones, under ``--out-dir``), and print the answer (:mod:`.verdict`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..arch import detect_gpus, parse_arch
from ..errors import ArchError, DDTreeInputError
from ..exitcodes import Exit
from .launch import LaunchError, Serving, from_file, read_launch
from .model import read_model
from .plan import GREEDY, make_plan
from .verdict import ROOT, answers, exit_status, render


def parse_sampling(values: list[str] | None) -> tuple[str, ...]:
    """``--sampling greedy`` or ``temperature=T[,top_p=P][,top_k=K]`` (repeatable); default greedy and T = 1.

    Raises:
        DDTreeInputError: another form.
    """
    out = []
    for value in values or [GREEDY, "temperature=1"]:
        if value == GREEDY:
            out.append(GREEDY)
            continue
        try:
            fields = dict(kv.split("=", 1) for kv in value.split(","))
            t = float(fields.pop("temperature"))
            for k in fields:
                if k not in ("top_p", "top_k", "min_p"):
                    raise KeyError(k)
                float(fields[k])
        except (KeyError, ValueError):
            raise DDTreeInputError("--sampling", value, "greedy, or temperature=T[,top_p=P][,top_k=K]") from None
        out.append(GREEDY if t == 0 else f"T={t:g}")
    return tuple(dict.fromkeys(out))


def _impl(path: str | None):
    """The DDTree build under test: ``--ddtree-impl``, else the one ``DDTREE_IMPLS`` entry, else the installed
    SGLang's own DDTree modules (``None``: none)."""
    from ..impls import describe, installed, paths_from_env

    paths = [path] if path else paths_from_env()
    if len(paths) > 1:
        raise DDTreeInputError("DDTREE_IMPLS", os.pathsep.join(paths), "one DDTree build (--ddtree-impl PATH)",
                               "preflight answers for the one build you serve")
    if paths:
        impl = describe(paths[0])
        if impl is None:
            raise DDTreeInputError("--ddtree-impl", paths[0], "an SGLang tree with DDTree modules",
                                   "no DDTree code found")
        return impl
    return installed()


def _launch_env(impl) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if impl is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(impl.package.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _header(serving: Serving, model, arch: str | None, gpus, impl) -> list[str]:
    s = serving
    spec = (f"{s.algorithm} budget {s.budget}, block size {s.block_size}, top-k {s.topk}" if s.algorithm
            else "no speculative decoding")
    resolved = ("" if s.resolved else f"  (not resolved here: {s.unresolved[:100]})" if s.parsed else
                f"  (the flags as given, not read by SGLang: {s.unresolved[:180]})")
    gpu = ", ".join(f"{g.name} ({g.arch})" for g in gpus) or "no GPU"
    where = f"{gpu}; static builds for {arch}" if arch else gpu
    return [f"configuration: {spec}; page size {s.page_size or '?'}; attention {s.attention_backend or '?'}; "
            f"CUDA graphs {'on' if s.graphs else 'off'}; --max-running-requests {s.max_running_requests or '?'}"
            + resolved,
            f"model:         {model.describe()}",
            f"SGLang:        {impl.name if impl else 'the installed release'}; this host: {where}"]


def _start_own(cells, results: Path, log, cases_dir: str, env: dict, failing_dir: Path):
    """Preflight's own cells (:mod:`.cells`) in a thread (their children run them)."""
    import threading

    from .cells import run_cells

    thread = threading.Thread(target=run_cells, args=(cells, results, log, cases_dir, env, str(failing_dir)),
                              daemon=True)
    thread.start()
    return thread


E2E_TESTS = ROOT / "tests" / "e2e" / "test_serve.py"
"""The e2e tier's test file in a checkout (an installed wheel has none: the replica is then not checked)."""
E2E_S = int(os.environ.get("DDTREE_PREFLIGHT_E2E_S", "900"))
"""How long the replica's servers may take in all (start, JIT builds, every phase) before it is stopped."""


def _serve_replica(plan, results: Path, out_dir: Path, stem: str, env: dict) -> int:
    """Serve the plan's replica (:mod:`ddtree_compat.e2e.replica`) with the e2e tier, its result lines appended to
    ``results``; pytest's output to ``<stem>-e2e.log``. Returns pytest's exit status (124: stopped at :data:`E2E_S`)."""
    spec = plan.replica.save(out_dir / f"{stem}-replica.json")
    cmd = [sys.executable, "-m", "pytest", str(E2E_TESTS), "-m", "e2e", "-q", "-rA", "-p", "no:cacheprovider",
           "--ddtree-static=off",
           f"--ddtree-results={results}", f"--ddtree-e2e-dir={out_dir / (stem + '-e2e')}"]
    env = {**env, "DDTREE_E2E_PROFILE": "replica", "DDTREE_E2E_REPLICA": str(spec)}
    env.setdefault("DDTREE_E2E_PARALLEL", "3")  # the target-only server, the greedy replica, the sampled one
    env.setdefault("DDTREE_E2E_MEM_FRACTION", "0.2")  # three servers on the one GPU (--max-total-tokens bounds each)
    with open(out_dir / f"{stem}-e2e.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=E2E_TESTS.parents[2])
        try:
            return proc.wait(timeout=E2E_S)
        except subprocess.TimeoutExpired:
            proc.terminate()  # pytest stops its servers (their process groups) as it ends
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.write(f"\npreflight: the replica stopped after {E2E_S} s (DDTREE_PREFLIGHT_E2E_S)\n")
            return 124


def _stem(out_dir: Path, arch: str) -> str:
    base = f"{time.strftime('%Y-%m-%d')}-{arch}-preflight"
    stem, n = base, 1
    while (out_dir / f"{stem}.jsonl").exists():
        n += 1
        stem = f"{base}-{n}"
    return stem


def run(args) -> int:
    """The subcommand (``args``: the CLI's namespace)."""
    launch = list(args.launch or [])
    if args.from_file:
        launch = from_file(args.from_file) + launch
    if not launch:
        raise LaunchError("no launch flags: give them after -- (as passed to sglang.launch_server) or --from-file")
    arch = args.arch
    if arch is not None:
        try:
            parse_arch(arch)
        except ArchError as e:
            raise DDTreeInputError("--arch", arch, "sm<major><minor>, e.g. sm120", str(e).split(": ", 1)[-1]) \
                from None
    sampling = parse_sampling(args.sampling)
    impl = _impl(args.ddtree_impl)
    try:
        serving = read_launch(launch, env=_launch_env(impl))
    except LaunchError as e:
        if impl is None and "DDTREE" in " ".join(launch).upper() and "DDTREE" in str(e).upper():
            raise LaunchError(f"{e}: this SGLang has no DDTREE; point DDTREE_IMPLS (or --ddtree-impl) at the "
                              "DDTree build you serve") from None
        raise
    if serving.algorithm == "DDTREE" and impl is None and (
            "speculative_ddtree_budget" not in serving.fields or not serving.parsed):
        raise LaunchError("this SGLang has no DDTREE: point DDTREE_IMPLS (or --ddtree-impl) at the DDTree build "
                          "you serve")
    model = read_model(serving.get("model_path"), args.model_config)
    gpus = detect_gpus()
    arch = arch or (gpus[0].arch if gpus else None)
    plan = make_plan(serving, model, arch, sampling, has_ddtree=impl is not None,
                     ddtree_name=impl.name if impl else "", device=bool(gpus), e2e_tests=E2E_TESTS.exists())
    header = _header(serving, model, arch, gpus, impl)
    if args.plan_only:
        print("\n".join(header))
        for c in plan.concerns:
            print(f"{'runs' if not c.unchecked else 'left':<5} {c.name}: {c.unchecked or c.expression()}"
                  + (f" ({c.note})" if c.name == "e2e" and not c.unchecked else ""))
        print(f"verify cases: {len(plan.verify_cases())} ({', '.join(v.label() for v in plan.variants)})")
        own = plan.own_cells()
        print(f"own cells: {len(own)}" + "".join(f"\n  {c.concern}: {c.record} {c.case.id} ({c.why})" for c in own))
        return int(Exit.OK)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = _stem(out_dir, arch or "cpu")
    concerns = {c.name: c for c in plan.concerns}
    own = [(c, concerns[c.concern].backends) for c in plan.own_cells()]
    with tempfile.TemporaryDirectory(prefix="ddtree-preflight-") as cases_dir:
        files = [str(c.save(cases_dir)) for c in plan.verify_cases()]
        cmd = [sys.executable, "-m", "ddtree_compat", "sweep", "--out-dir", str(out_dir), "--name", stem]
        if args.workers:
            cmd += ["-n", args.workers]
        cmd += ["--", "-k", plan.keyword_expression(), *(f"--ddtree-case={f}" for f in files)]
        env = dict(os.environ)
        if impl is not None:
            env["DDTREE_IMPLS"] = str(impl.package)
        log = out_dir / f"{stem}.log"
        print("\n".join(header), flush=True)
        print(f"running the cells this configuration reaches ({len(files)} verify cases and the families' own, "
              f"{len(own)} of preflight's own); log: {log}", flush=True)
        start = time.time()
        own_results = out_dir / f"{stem}-own.jsonl"
        with open(log, "w") as fh, open(out_dir / f"{stem}-own.log", "w") as own_log:
            # on a GPU the own cells (deployment shapes: the card's memory) run after the sweep; here beside it
            failing = out_dir / f"{stem}-own-cases"
            beside = _start_own(own, own_results, own_log, cases_dir, env, failing) if own and not gpus else None
            status = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
            if own and gpus:
                _start_own(own, own_results, own_log, cases_dir, env, failing).join()
            elif beside is not None:
                beside.join()
    replica_stop = ""
    if any(c.name == "e2e" for c in plan.runs()) and (out_dir / f"{stem}.jsonl").exists():
        print(f"serving the replica (e2e tier); log: {out_dir / (stem + '-e2e.log')}", flush=True)
        served = _serve_replica(plan, out_dir / f"{stem}.jsonl", out_dir, stem, {**_launch_env(impl), **(
            {"DDTREE_IMPLS": str(impl.package)} if impl is not None else {})})
        if served == 124:
            replica_stop = f"the replica stopped after {E2E_S} s (DDTREE_PREFLIGHT_E2E_S) before every cell ran"
    results = out_dir / f"{stem}.jsonl"
    if not results.exists():
        print(f"the sweep wrote no results (exit {status}); its log: {log}", file=sys.stderr)
        return int(Exit.USAGE) if status == int(Exit.USAGE) else int(Exit.INTERNAL)
    if own_results.exists():  # one results file: the own cells' lines after the sweep's
        with open(results, "a") as out:
            out.write(own_results.read_text())
        own_results.unlink()
    from ..results import load

    spec = out_dir / f"{stem}-replica.json"
    loaded = load([results])
    result = answers(plan, loaded.records,
                     f"DDTREE_E2E_PROFILE=replica DDTREE_E2E_REPLICA={spec}" if spec.exists() else "",
                     loaded.collect_errors, replica_stop)
    screen = ["", render(plan, result, []).strip("\n")]
    screen += [f"the suite could not collect {path}: {error} (its cells did not run; the log: {log})"
               for path, error in loaded.collect_errors]
    saved = out_dir / f"{stem}-screen.txt"
    screen.append(f"results: {results} (report {results.with_suffix('.md')}, this answer {saved}); "
                  f"{time.time() - start:.0f}s")
    print("\n".join(screen))
    # the answer kept beside the results, with the launch flags it answers for
    saved.write_text("\n".join([*header, f"launch:        {shlex.join(launch)}", *screen]) + "\n")
    return int(exit_status(result))
