"""py_backend.lifeline: a process tied to its parent ends when the parent is killed, while its
main thread is busy in Python, with the kernel's parent-death signal and with the watchdog
thread alone (as on a system without prctl)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .helpers import REPO, scaled

CHILD = """
import sys
from py_backend import lifeline
if sys.argv[1] == "thread-only":
    lifeline.parent_death_signal = lambda: False
lifeline.tie_to_parent()
print("ready", flush=True)
while True:  # busy in Python, holding the GIL between switches; never reads anything
    pass
"""

# the parent: starts the child, says its pid once the child is tied, then waits to be killed
MIDDLE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                         stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
print(child.pid, flush=True)
child.wait()
"""


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return ") Z " in f.read()
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("mode", ["kernel", "thread-only"])
def test_a_busy_child_ends_within_a_second_of_its_parent(mode: str) -> None:
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, CHILD, mode], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert middle.stdout is not None
        child = int(middle.stdout.readline())
        time.sleep(0.3)
        assert not gone(child)
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        deadline = time.monotonic() + scaled(1.0)
        while not gone(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone(child), f"child {child} ({mode}) still running 1 s after its parent died"
    finally:
        middle.kill()
        if child and not gone(child):
            os.kill(child, signal.SIGKILL)
