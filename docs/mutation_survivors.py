"""The survivors of the last mutmut run, grouped by function, each with the line it changed.

    python docs/mutation_survivors.py [--all]   # from the repository's root, after ``mutmut run``

Prints what ``mutmut results`` lists as survived (with ``--all``: timeouts too), and for each
mutant the lines ``mutmut show`` says it changed, so that a reviewer can write down a verdict per
mutant (docs/mutation.rst keeps the verdicts by kind, not the ids, which move at every edit).
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import defaultdict

RESULT = re.compile(r"^\s*(?P<name>\S+__mutmut_\d+): (?P<status>.+)$")


def results(statuses: set[str]) -> dict[str, list[tuple[str, str]]]:
    """Function -> [(mutant, status)] for the mutants whose status is one of ``statuses``."""
    listed = subprocess.run(["mutmut", "results"], capture_output=True, text=True, check=True)  # not killed
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for line in listed.stdout.splitlines():
        match = RESULT.match(line)
        if match and match["status"].strip() in statuses:
            function = match["name"].rsplit("__mutmut_", 1)[0]
            found[function].append((match["name"], match["status"].strip()))
    return found


def changed_lines(mutant: str) -> list[str]:
    shown = subprocess.run(["mutmut", "show", mutant], capture_output=True, text=True, check=False)
    return [line for line in shown.stdout.splitlines() if line.startswith(("+ ", "- ", "+\t", "-\t"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--all", action="store_true", help="timeouts too")
    statuses = {"survived", "timeout"} if parser.parse_args().all else {"survived"}
    for function, mutants in sorted(results(statuses).items()):
        print(function)
        for mutant, status in sorted(mutants, key=lambda item: int(item[0].rsplit("_", 1)[1])):
            print(f"  {mutant.rsplit('__', 1)[1]} ({status})")
            for line in changed_lines(mutant):
                print(f"      {line}")


if __name__ == "__main__":
    main()
