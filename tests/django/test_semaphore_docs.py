"""The runnable example of docs/semaphores.rst runs as it is shown: once, then twice at once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "semaphores.rst"


def example() -> str:
    """The code block that starts with ``# semaphore_demo.py``, as a reader would save it."""
    text = PAGE.read_text()
    start = text.index("    # semaphore_demo.py")
    end = text.index("\nIts output looks like this")
    return textwrap.dedent(text[start:end])


def start(script: Path, environ: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, script.name], cwd=script.parent, env=environ, stdout=subprocess.PIPE, text=True
    )


def test_the_example_lets_three_of_eight_workers_in_at_once(tmp_path: Path):
    script = tmp_path / "semaphore_demo.py"
    script.write_text(example())
    environ = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_SETTINGS")}
    environ["PYTHONPATH"] = str(ROOT)
    environ.pop("PYTEST_CURRENT_TEST", None)
    runs = [start(script, environ)]  # the first run creates the tables
    outputs = [runs[0].communicate(timeout=120)[0]]
    runs += [start(script, environ) for _ in range(2)]  # then two at once, on the same file
    outputs += [run.communicate(timeout=120)[0] for run in runs[1:]]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    for run, output in enumerate(outputs):
        lines = output.splitlines()
        holds = [re.fullmatch(r"worker \d holds exports:[123] with token \d+", line) for line in lines[:-1]]
        assert all(holds) and len(holds) == 8, output
        # Alone, a run fills the three permits; two at once share them, each seeing its own holders.
        most = re.fullmatch(r"at most (\d) exports at once", lines[-1])
        assert most is not None, output
        assert (int(most[1]) == 3) if run == 0 else (1 <= int(most[1]) <= 3), output
