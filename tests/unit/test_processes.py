"""Process liveness by pid / pgid (the e2e servers' stop, the static tier's claims)."""

import os
import subprocess
import sys
import time

from ddtree_compat.processes import group_alive, pid_alive


def test_a_running_process_is_alive_and_an_exited_unreaped_one_is_not():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert pid_alive(child.pid) and group_alive(child.pid)  # a new session: its pgid is its pid
        child.kill()
        deadline = time.monotonic() + 10
        while pid_alive(child.pid) and time.monotonic() < deadline:  # a zombie until waited for
            time.sleep(0.05)
        assert not pid_alive(child.pid) and not group_alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(child.pid) and pid_alive(os.getpid())
