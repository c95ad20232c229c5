"""A standby server process (``ddtree_compat.e2e.standby``): it imports the module's top-level imports before
its argv comes, then runs the module as ``python -m`` would; an empty line ends it without running it."""

import json
import os
import sys
import time
from pathlib import Path

from ddtree_compat.e2e.process import ServerProcess

MODULE = '''
import slow_dependency
import json, os, sys
if __name__ == "__main__":
    print("RAN " + json.dumps({"argv": sys.argv[1:], "spec": __spec__.name, "stdin": sys.stdin.read(),
                               "imported_at": slow_dependency.AT, "nice": os.nice(0)}), flush=True)
'''
DEPENDENCY = '''
import pathlib, time
AT = time.time()
pathlib.Path(__file__).with_name("imported").write_text(str(AT))
'''


def _stand_by(tmp_path: Path, name: str) -> ServerProcess:
    (tmp_path / "standby_server.py").write_text(MODULE)
    (tmp_path / "slow_dependency.py").write_text(DEPENDENCY)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return ServerProcess(name, [], env, tmp_path / f"{name}.log", 0).stand_by(sys.executable, "standby_server")


def _wait(predicate, limit_s: float = 60.0) -> None:
    deadline = time.time() + limit_s
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_a_standby_imports_first_and_runs_the_module_as_main_once_released(tmp_path):
    server = _stand_by(tmp_path, "s")
    _wait(lambda: (tmp_path / "imported").exists())  # its imports ran before it had an argv
    time.sleep(0.3)
    assert server.alive() and "RAN" not in server.read_log()  # and it waits for one
    released_at = time.time()
    server.niceness = 3  # a later server's priority: it stood by at ours, it runs at that
    assert server.release([sys.executable, "-m", "standby_server", "--port", "1234"])
    assert server.standing_by is None and server.standby_s > 0.3 and server.started_at >= released_at
    server.proc.wait(timeout=60)
    line = next(x for x in server.read_log().splitlines() if x.startswith("RAN "))
    ran = json.loads(line[4:])
    # the argv of `python -m standby_server --port 1234`, run as that module's __main__, stdin empty as for a
    # server started directly; its imports were not run a second time
    assert ran["argv"] == ["--port", "1234"] and ran["spec"] == "standby_server" and ran["stdin"] == ""
    assert ran["imported_at"] == float((tmp_path / "imported").read_text()) < released_at
    assert ran["nice"] == os.nice(0) + 3
    assert server.proc.returncode == 0


def test_a_standby_is_not_released_for_another_module_and_ends_when_dismissed(tmp_path):
    server = _stand_by(tmp_path, "d")
    assert not server.release([sys.executable, "-m", "other_module"])  # argv for another module: left standing
    assert not server.release(["/other/python", "-m", "standby_server"])
    assert server.standing_by is not None and server.alive()
    server.dismiss()
    assert not server.alive() and server.proc.returncode == 0  # it ended at the end of its stdin, never ran
    assert not server.log_path.exists()  # no log of a server that did not run
