"""The server harness: readiness deadline, fault on early exit, teardown of the whole process group
(also on SIGTERM and when this process is SIGKILLed), feature-detected flags. Runs on the CPU with
``fake_server.py`` standing in for ``sglang.launch_server`` (and the real probe of the installed SGLang)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddtree_compat.e2e import checkpoints as ck
from ddtree_compat.e2e.drafts import write_draft
from ddtree_compat.e2e import command, ports, probe, process
from ddtree_compat.e2e.configs import DDTREE, plan
from ddtree_compat.e2e.probe import Capabilities
from ddtree_compat.e2e.process import ServerProcess, ServerStartError
from ddtree_compat.processes import pid_alive

FAKE = Path(__file__).with_name("fake_server.py")
ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    return pid_alive(pid)


def wait_for(path: Path, seconds: float = 20.0) -> str:
    t0 = time.time()
    while time.time() - t0 < seconds:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def tree(pid: int) -> set[int]:
    import psutil

    return {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}


@pytest.fixture
def launch(tmp_path):
    made: list[ServerProcess] = []

    def start(mode: str) -> ServerProcess:
        port = ports.free_port()
        argv = [sys.executable, str(FAKE), "--port", str(port), "--mode", mode, "--pidfile", str(tmp_path / f"{mode}.pids")]
        s = ServerProcess(mode, argv, probe.server_env(), tmp_path / f"{mode}.log", port).start()
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()


def test_ready_then_stop_leaves_no_process(launch, tmp_path):
    s = launch("ready")
    assert s.wait_ready(30, poll_s=0.1) < 30
    pids = tree(s.proc.pid)
    wait_for(tmp_path / "ready.pids")
    time.sleep(0.3)
    pids |= tree(s.proc.pid)
    assert len(pids) >= 3  # server, its worker, the worker's child
    assert "fake server starting in mode ready" in s.read_log()
    assert s.stop() == []
    assert not [p for p in pids if alive(p)]
    assert s.stop() == []  # idempotent


def test_a_worker_that_left_the_group_is_killed_too(launch, tmp_path):
    s = launch("escape")
    s.wait_ready(30, poll_s=0.1)
    escaped = int(wait_for(tmp_path / "escape.pids").split()[-1])
    assert os.getpgid(escaped) != os.getpgid(s.proc.pid)
    s._snapshot_descendants()
    assert s.stop() == [] and not alive(escaped)


def test_exit_before_ready_is_a_classified_fault(launch):
    s = launch("crash")
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(30, poll_s=0.1)
    assert "exited with code 3" in str(e.value)
    assert e.value.fault_class == "illegal-instruction"
    assert "Scheduler hit an exception" in e.value.excerpt


RAISED = ("scheduler raised at /opt/sglang/python/sglang/srt/speculative/ddtree_worker.py:412 in verify: "
          "RuntimeError: CUDA error: an illegal instruction was encountered")


def test_a_child_that_raised_before_ready_is_a_fault_at_once(launch):
    """The scheduler's traceback and SGLang's SIGQUIT line, then the server hangs (SGLang lingers over its crash
    diagnostics): the verdict comes from the log within seconds, not at the deadline or the exit."""
    s = launch("raise-before-ready")
    t0 = time.time()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(120, poll_s=0.1)
    assert time.time() - t0 < 15
    assert str(e.value).startswith(f"server raise-before-ready: {RAISED} (") and "before it was ready" in str(e.value)
    assert e.value.fault_class == "illegal-instruction"
    assert "Received sigquit from a child process" in e.value.excerpt and "line 412, in verify" in e.value.excerpt
    assert not s.alive()  # stopped


def test_check_log_reads_new_bytes_and_waits_for_the_exception_line(tmp_path):
    """A header whose frame line is not written yet is carried to the next poll; a traceback whose exception
    line is still coming is read again once the log settles."""
    from tests.e2e.fake_server import SCHEDULER_RAISES

    log = tmp_path / "server.log"
    s = ServerProcess("s", [], {}, log, 0)
    s.started_at = time.time()
    head, rest = SCHEDULER_RAISES.split("\n", 1)
    frames, exception = rest.split("RuntimeError:", 1)
    log.write_text("[2026-12-02 14:03:09] The server is fired up and ready to roll!\n" + head + "\n")
    s.check_log()  # a header alone is no traceback yet
    size = s.log_size()
    with open(log, "a") as f:
        f.write(frames)
    late = threading.Timer(0.4, lambda: open(log, "a").write("RuntimeError:" + exception + "\n"))
    late.start()
    with pytest.raises(process.ServerFault) as e:
        s.check_log()
    late.join()
    assert str(e.value) == RAISED and e.value.fault_class == "illegal-instruction"
    assert s._scanned == size + len(frames.encode())  # what it read before the log settled: only new bytes
    with pytest.raises(process.ServerFault) as again:  # once raised, always raised
        s.check_log()
    assert again.value is e.value


def _target():
    config = plan("default", attention="triton")[0]
    assert config.id == "target"
    return config


@pytest.mark.parametrize("phase", [0, 1], ids=["in-turn", "concurrent"])
def test_a_child_that_raised_while_serving_ends_the_phase_at_once(launch, phase):
    """The first verify raises and the request hangs; the phase ends within seconds with a fault naming the
    traceback's last frame, and the server is stopped (its request deadline is a minute)."""
    from ddtree_compat.e2e.judge import judge
    from ddtree_compat.e2e.runner import run_phase

    config = _target()
    p = config.phases[phase]
    s = launch("raise-at-verify")
    s.wait_ready(30, poll_s=0.1)
    t0 = time.time()
    obs = run_phase(s, p, timeout=60, first=True, poll_s=0.2)
    assert time.time() - t0 < 15
    assert not s.alive()
    assert obs.server_fault["message"] == RAISED and obs.returncode is None  # stopped by us, not exited
    assert all(r is None for r in obs.responses) and all(obs.errors)
    j = judge(config, p, config.expectation(p, ck.TinyShape()), obs)
    assert (j.verdict.outcome, j.verdict.fault_class) == ("fault", "illegal-instruction")
    assert j.verdict.message.startswith(f"{RAISED} (seen during the phase, ")
    assert "RuntimeError: CUDA error: an illegal instruction was encountered" in j.log_excerpt


def test_a_warning_that_quotes_a_traceback_does_not_stop_the_server(launch):
    from ddtree_compat.e2e.runner import run_phase

    config = _target()
    s = launch("raise-survived")
    s.wait_ready(30, poll_s=0.1)
    obs = run_phase(s, config.phases[1], timeout=60, first=True, poll_s=0.2)
    assert "error: Traceback (most recent call last):" in obs.window
    assert obs.server_fault is None and s.alive() and obs.responses[0] == {"output_ids": [1], "meta_info": {}}


def test_a_session_gives_the_failed_server_s_other_cells_its_fault(tmp_path):
    """The cell whose verify raised is a fault; the server's next cell gets the same fault at once (no request to
    a stopped server), and the capture judges again to the same verdict."""
    from ddtree_compat.e2e.runner import rejudge
    from ddtree_compat.e2e.session import E2ECell, E2ESession

    sess = E2ESession(tmp_path / "e2e", plan("default"), [])
    target = sess.configs["target"]
    cells = [E2ECell(target, p) for p in target.phases]
    sess.select(cells)
    port = ports.free_port()
    s = ServerProcess("target", [sys.executable, str(FAKE), "--port", str(port), "--mode", "raise-at-verify"],
                      probe.server_env(), tmp_path / "e2e" / "servers" / "target" / "server.log", port).start()
    try:
        s.wait_ready(30, poll_s=0.1)
        sess.scheduler.servers["target"] = s
        first = sess.run(cells[0]).judgement.verdict
        assert (first.outcome, first.fault_class) == ("fault", "illegal-instruction")
        assert first.message.startswith(RAISED)
        t0 = time.time()
        second = sess.run(cells[1])
        assert time.time() - t0 < 1 and second.observation is None
        verdict = second.judgement.verdict
        assert (verdict.outcome, verdict.fault_class) == ("fault", "illegal-instruction")
        assert verdict.message == f"server target failed in cell {cells[0].id}: {RAISED}"
        capture = sess.root / "servers" / "target" / cells[0].phase.name
        again = rejudge(capture)
        assert (again.verdict.outcome, again.verdict.message) == ("fault", first.message)
    finally:
        s.stop()


def test_missed_deadline_is_a_hang(launch):
    s = launch("never")
    t0 = time.time()
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(1.5, poll_s=0.1)
    assert e.value.fault_class == "hang" and time.time() - t0 < 10
    assert s.stop() == []


def test_health_when_there_is_no_ready_route(launch):
    assert launch("health-only").wait_ready(30, poll_s=0.1) < 30


_PARENT = """
import sys, time
sys.path.insert(0, {root!r})
from ddtree_compat.e2e import ports, probe, process
port = ports.free_port()
s = process.ServerProcess("p", [sys.executable, {fake!r}, "--port", str(port), "--mode", "ready"], probe.server_env(),
                      {log!r}, port).start()
s.wait_ready(30, poll_s=0.1)
print(s.proc.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_servers_die_with_their_parent(tmp_path, sig):
    """SIGTERM: the handler stops every server. SIGKILL: nothing runs in the parent, PR_SET_PDEATHSIG
    kills the server (SGLang's own workers follow it: ``kill_itself_when_parent_died``)."""
    code = _PARENT.format(root=str(ROOT), fake=str(FAKE), log=str(tmp_path / "p.log"))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
        workers = tree(server_pid) - {server_pid}
        os.kill(parent.pid, sig)
        parent.wait(timeout=30)
        t0 = time.time()
        while alive(server_pid) and time.time() - t0 < 15:
            time.sleep(0.1)
        assert not alive(server_pid)
        if sig == signal.SIGTERM:
            time.sleep(0.5)
            assert not [p for p in workers if alive(p)]
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in tree(server_pid) if "server_pid" in locals() and alive(server_pid) else ():
            os.kill(p, signal.SIGKILL)
        for p in (workers if "workers" in locals() else ()):  # the fake's workers have no death signal
            if alive(p):
                os.kill(p, signal.SIGKILL)


ALL_FLAGS = frozenset(
    f for c in plan("full") for f in command._required_flags(c)) | {"--disable-cuda-graph", "--cuda-graph-max-bs-decode",
                                                             "--max-running-requests", "--random-seed", "--nccl-port"}
CAPS = Capabilities("0.5.23", ALL_FLAGS, ("EAGLE", "STANDALONE", "DFLASH", DDTREE), {"flashinfer": True, "flash_mla": True})


def _argv(config, caps, draft=Path("D"), port=1, nccl=None):
    return command.server_argv(command.server_args(config, caps, Path("T"), draft), port, nccl)


def test_argv_from_detected_flags():
    configs = {c.shape_id: c for c in plan("default", attention="triton")}
    argv = _argv(configs["eagle-k2-s6-d13-mod4-graph"], CAPS, port=30000, nccl=30001)
    joined = " ".join(argv)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    for part in ("--host 127.0.0.1", "--port 30000", "--disable-radix-cache", "--skip-tokenizer-init",
                 "--attention-backend triton", "--speculative-algorithm EAGLE", "--speculative-draft-model-path D",
                 "--speculative-num-steps 6", "--speculative-eagle-topk 2", "--speculative-num-draft-tokens 13",
                 "--cuda-graph-max-bs-decode 8", "--nccl-port 30001", "--decode-log-interval 1", "--enable-metrics"):
        assert part in joined
    assert "--disable-cuda-graph" not in argv
    eager = _argv(configs["eagle-k1-s8-d9-never-eager"], CAPS)
    assert "--disable-cuda-graph" in eager and "--nccl-port" not in eager
    newer = dataclasses.replace(CAPS, flags=CAPS.flags - {"--disable-cuda-graph", "--nccl-port"})
    assert "--cuda-graph-backend-decode" in _argv(configs["eagle-k1-s8-d9-never-eager"], newer)
    target = _argv(configs["target"], CAPS, draft=None)
    assert not [a for a in target if a.startswith("--speculative")]
    ddtree = _argv(configs["ddtree-b8-spine-never-eager"], CAPS)
    assert "--speculative-ddtree-budget" in ddtree and ddtree[ddtree.index("--speculative-ddtree-budget") + 1] == "8"
    assert "--speculative-num-draft-tokens" in ddtree  # block size where --speculative-ddtree-block-size is missing
    sweep = {c.shape_id: c for c in plan("ddtree", attention="triton")}
    dd_caps = dataclasses.replace(CAPS, flags=CAPS.flags | {"--speculative-ddtree-block-size", "--is-ddtree-prune",
                                                            "--cuda-graph-backend-prefill"})
    pruned = _argv(sweep["ddtree-b16-tree-always-graph-prune"], dd_caps)
    joined = " ".join(pruned)
    assert "--speculative-ddtree-block-size 16" in joined and "--is-ddtree-prune" in pruned
    assert "--cuda-graph-backend-prefill disabled" in joined and "--disable-cuda-graph" not in pruned
    assert "--is-ddtree-prune" in command.unavailable_reason(sweep["ddtree-b16-tree-always-graph-prune"],
                                                             dataclasses.replace(CAPS, algorithms=(*CAPS.algorithms, "DDTREE")))


def test_the_attention_backend_has_one_encoding_and_no_fallback():
    """``default`` passes no ``--attention-backend`` (SGLang chooses); a name passes itself; a configuration with
    none set (a profile's template, never planned) is refused, not served on a backend nobody asked for."""
    default = {c.shape_id: c for c in plan("default", attention="default")}["eagle-k2-s6-d13-mod4-graph"]
    assert "--attention-backend" not in _argv(default, CAPS)
    template = dataclasses.replace(default, attention="")
    with pytest.raises(ValueError, match="no attention backend set"):
        command.server_args(template, CAPS, Path("T"), Path("D"))


def test_unavailable_reasons():
    configs = {c.shape_id: c for c in plan("default", attention="triton")}
    assert command.unavailable_reason(configs["eagle-k1-s8-d9-always-eager"], CAPS) == ""
    no_ddtree = dataclasses.replace(CAPS, algorithms=("EAGLE", "STANDALONE", "DFLASH"))
    assert "has no DDTREE" in command.unavailable_reason(configs["ddtree-b8-spine-never-eager"], no_ddtree)
    no_fi = dataclasses.replace(CAPS, modules={"flashinfer": False})
    assert "flashinfer" in command.unavailable_reason(configs["dflash-b16-always-eager"], no_fi)
    # seen on the H200: SGLang 0.5.23 imports flash_mla when it captures the draft's CUDA graphs
    no_mla = dataclasses.replace(CAPS, modules={"flashinfer": True, "flash_mla": False})
    assert "flash_mla" in command.unavailable_reason(configs["eagle-k1-s12-d13-always-graph"], no_mla)
    assert command.unavailable_reason(configs["eagle-k1-s8-d9-always-eager"], no_mla) == ""
    assert command.unavailable_reason(configs["eagle-k1-s8-d9-always-eager"], no_fi) == ""
    # DFLASH / DDTREE graphs do not go through the EAGLE worker's FlashMLA import; a tree whose EAGLE worker
    # does not import it needs no flash_mla for EAGLE graphs either
    dd = dataclasses.replace(no_mla, algorithms=(*CAPS.algorithms, "DDTREE"))
    assert command.unavailable_reason(plan("ddtree")[1], dd) == ""
    assert command.unavailable_reason(configs["eagle-k1-s12-d13-always-graph"],
                                  dataclasses.replace(no_mla, eagle_graphs_import_flash_mla=False)) == ""
    old = dataclasses.replace(CAPS, flags=CAPS.flags - {"--speculative-eagle-topk"})
    assert "--speculative-eagle-topk" in command.unavailable_reason(configs["eagle-k4-s3-d9-mod2-eager"], old)
    broken = dataclasses.replace(CAPS, error="ModuleNotFoundError: No module named 'uvicorn'")
    assert "uvicorn" in command.unavailable_reason(configs["target"], broken)


def test_probe_of_the_installed_sglang():
    """The real probe (a child process importing the installed SGLang): every flag the suite passes exists,
    and the algorithms are what the plan assumes (sglang 0.5.23 has no DDTREE)."""
    pytest.importorskip("sglang")
    caps = probe.probe()
    assert caps.flags, caps.error
    assert caps.failure is None, caps.failure  # a missing module is an error reason (a skip); nothing else broke
    ok = dataclasses.replace(caps, error=None, modules={**caps.modules, "flashinfer": True, "flash_mla": True})
    for c in plan("full"):
        reason = command.unavailable_reason(c, ok)
        if c.algorithm == DDTREE and DDTREE not in caps.algorithms:
            assert "has no DDTREE" in reason
        else:
            assert reason == "", (c.id, reason)
    assert {"EAGLE", "STANDALONE", "DFLASH"} <= set(caps.algorithms)
    assert caps.has("--disable-cuda-graph") or caps.has("--cuda-graph-backend-decode")


def test_server_env_drops_the_interpreter_and_keeps_the_path(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", "/tmp/sgl_site")
    env = probe.server_env()
    assert "TRITON_INTERPRET" not in env and env["PYTHONPATH"] == "/tmp/sgl_site"
    assert env["HF_HUB_OFFLINE"] == "1" and env["PYTHONUNBUFFERED"] == "1"


def test_free_ports_are_distinct_and_leave_room_for_the_grpc_port():
    taken: set[int] = set()
    picked = [ports.free_port(taken) for _ in range(5)]
    assert len(set(picked)) == 5 and taken == set(picked)
    assert all(p + 10000 <= 65535 for p in picked)  # older DDTree trees refuse port + 10000 > 65535


def test_checkpoint_folder_names_match_the_plan(tmp_path):
    for spec in {c.draft for c in plan("full") if c.draft}:
        assert write_draft(tmp_path, spec).name == spec.name
    assert json.loads((tmp_path / "eagle-never" / "config.json").read_text())["architectures"] == ["LlamaForCausalLMEagle"]


def test_the_attention_backend_a_server_chose_is_read_from_its_log():
    """SGLang 0.5.23 leaves ``attention_backend`` unset until the server starts (the H200, 2026-12-01: the probe
    read ``None``; the log said ``Use flashinfer backend by default``): the cell records what the log says."""
    from ddtree_compat.e2e.logparse import attention_backend

    log = ("[2026-12-01 22:22:55] Attention backend not specified. Use flashinfer backend by default.\n"
           "[2026-12-01 22:23:00] server_args={'model_path': '/tmp/t', 'attention_backend': 'flashinfer', "
           "'sampling_backend': 'pytorch'}\n")
    assert attention_backend(log) == "flashinfer"
    assert attention_backend("[x] Load weight begin.\n") == ""


def test_ports_are_picked_below_the_ephemeral_range_and_apart(monkeypatch):
    """An ephemeral port can be taken by an outgoing connection before the server binds it (H200, 2026-12-02);
    the ports of one session stay PORT_SPACING apart (a server binds a few next to its own)."""
    monkeypatch.setattr(ports, "ephemeral_floor", lambda: 32768)
    taken: set[int] = set()
    picked = [ports.free_port(taken) for _ in range(50)]
    assert all(ports.PORT_RANGE[0] <= p < 32768 for p in picked)
    assert all(abs(a - b) >= ports.PORT_SPACING for i, a in enumerate(picked) for b in picked[i + 1:])


def test_a_port_taken_before_the_bind_is_ours_to_retry(launch):
    s = launch("port-taken")
    with pytest.raises(ports.PortInUse, match=f"its port {s.port} was taken"):
        s.wait_ready(30, poll_s=0.1)
    assert not s.alive()


def test_a_session_on_a_host_without_a_gpu_writes_no_timeline(tmp_path):
    """No GPU: no server can start, so the session keeps no timeline: neither its start nor its close."""
    from ddtree_compat.e2e.session import E2ECell, E2ESession

    sess = E2ESession(tmp_path / "e2e", plan("default"), [])
    target = sess.configs["target"]
    sess.select([E2ECell(target, p) for p in target.phases])
    assert sess.host_reason() and sess.close() == []
    assert not (tmp_path / "e2e" / "timeline.jsonl").exists()
