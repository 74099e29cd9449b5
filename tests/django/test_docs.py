"""What the docs say of the code stays true of it: the functions the mutation campaign names exist, the
rule numbers cited are the rules meant, a section a page points to exists, and the glossary's words keep
their one meaning (docs/design.rst)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ENGINE = ROOT / "django_simba" / "engine"


def methods(path: Path) -> dict[str, set[str]]:
    """Each class of the module and the functions defined in it."""
    found: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            defined = (ast.FunctionDef, ast.AsyncFunctionDef)
            found[node.name] = {f.name for f in node.body if isinstance(f, defined)}
    return found


def test_the_mutation_command_names_functions_that_exist():
    text = (DOCS / "mutation.rst").read_text()
    # L='django_simba.engine.lines.xǁLinesǁ': the module, and the class ("" for C: named after ǁ)
    found = re.findall(r"^\s*([LKC])='django_simba\.engine\.(\w+)\.xǁ([A-Za-z_]*)ǁ?'", text, re.M)
    modules = {key: module for key, module, _ in found}
    prefixes = {key: owner for key, _, owner in found}
    assert set(prefixes) == {"L", "K", "C"}, prefixes
    missing = []
    for key, target in re.findall(r'"\$\{([LKC])\}([^"]+)__\*"', text):
        classes = methods(ENGINE / f"{modules[key]}.py")
        owner, _, function = (prefixes[key] + "ǁ" + target if prefixes[key] else target).rpartition("ǁ")
        if function not in classes.get(owner, set()):
            missing.append(f"{modules[key]}.{owner}.{function}")
    assert not missing, missing


def rules(text: str) -> dict[int, str]:
    """The numbered rules of a list ("1. ..." up to the next number), by number."""
    found = re.findall(r"^(\d)\. (.*?)(?=^\d\. |^\S|\Z)", text, re.M | re.S)
    return {int(number): " ".join(body.split()) for number, body in found}


#: Words of each rule, in the code's docstring and on the page alike.
KEYS = {1: "forked child", 2: "PREFORK_PARENT", 3: "test run", 4: "autoreloader's watcher", 5: "gunicorn's "
        "master", 6: "gunicorn", 7: "SERVING_COMMANDS", 8: "no other process serves"}  # fmt: skip
#: The process a section of docs/deploying.rst means when it cites a rule: words of that rule.
MEANT = {"gunicorn": "gunicorn's master", "Celery": "Celery's worker main process", "runserver": "the "
         "autoreloader's watcher", "uWSGI": "uWSGI's master"}  # fmt: skip


def test_the_rule_numbers_cited_in_deploying_are_the_rules_they_mean():
    import django_simba.servers.serving as serving

    text = (DOCS / "deploying.rst").read_text()
    listed = rules(text[text.index("The rule, first match wins") :])
    in_code = rules(serving.__doc__ or "")
    assert sorted(listed) == sorted(in_code) == list(range(1, 9))
    for number, words in KEYS.items():  # the page and the code number the rules alike
        assert words in listed[number] and words in in_code[number], (number, words)
    cited = 0
    section = ""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if index + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[index + 1]):
            section = line.strip()
        for number in re.findall(r"\(rule (\d)\)", line):
            assert MEANT[section] in listed[int(number)], (section, number)
            cited += 1
    assert cited >= 4


def test_a_readme_section_a_page_points_to_exists():
    readme = (ROOT / "README.rst").read_text().splitlines()
    underline = re.compile(r"[=\-~^]{3,}")
    titles = {line.strip() for line, under in itertools.pairwise(readme) if underline.fullmatch(under)}
    pointed = []
    for page in DOCS.glob("*.rst"):
        text = " ".join(page.read_text().split())
        pointed += [(page.name, s) for s in re.findall(r'README(?:\.rst)?,? \(?"([^"]+)"', text)]
        pointed += [(page.name, s) for s in re.findall(r"README \(([A-Z][\w ]+)\)", text)]
        if re.search(r"table is in the README", text):
            pointed.append((page.name, "a table"))
    assert not [(page, section) for page, section in pointed if section not in titles], pointed


def words_outside_the_glossary(page: str) -> str:
    text = (DOCS / page).read_text()
    if page == "design.rst":
        start = text.index("Glossary\n========")
        return text[:start] + text[text.index("The pieces\n==========") :]
    return text


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.rst")))
def test_the_glossary_words_keep_their_one_meaning(page):
    text = " ".join(words_outside_the_glossary(page).split())
    assert "lease_lost" not in text  # the signal is term_lost
    if page in ("redis.rst", "proof.rst", "zookeeper.rst", "sentinel.rst"):
        # A Redis Cluster's slot is a hash slot; the simulation's place of a process is its seat.
        assert not re.findall(r"(?<!hash )\bslots?\b", text), page
    if page in ("design.rst", "redis.rst", "zookeeper.rst", "backends.rst"):
        assert "hand-off" not in text.lower(), page  # the mechanism is the hand-over


def test_the_simulation_calls_a_process_place_its_seat():
    from django_simba.testing.simulation import faults

    assert not [name for name in vars(faults) if "slot" in name.lower()]
