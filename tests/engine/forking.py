"""Running a function in a forked child of the test's process."""

from __future__ import annotations

import os


def run_in_child(report) -> str:
    """Fork, run ``report()`` in the child and return what it wrote."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(report()).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 1000).decode()
    os.close(read)
    assert os.WEXITSTATUS(status) == 0
    return message
