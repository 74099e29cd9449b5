"""The package's layout (issue 25): no import circle anywhere outside the simulation (the registry
is handed its steps instead of importing them; the database vendors know their base, and only the
loader knows the vendors), and an ``apps.py`` that only wires."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import django_simba

PACKAGE = Path(django_simba.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:`` (imports for the type checker only)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (imported for the type checker only)."""
    for node in ast.iter_child_nodes(tree):
        if type_checking_only(node):
            continue
        yield node
        yield from runtime_nodes(node)


def imports(path: Path, modules: Collection[str]) -> set[str]:
    """Every django_simba module ``path`` imports when it runs, at the top or inside a function.

    ``from package import module`` imports ``module``; the package counts only when a name is
    taken from it (its ``__init__`` runs first anyway, as for any of its modules).
    """
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(modules)
            found |= submodules
            if len(submodules) < len(node.names):
                found.add(base)
    return {module for module in found if module in modules and module != name}


def graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imports(path, modules) for name, path in modules.items()}


def cycles_through(edges: dict[str, set[str]], start: str) -> list[list[str]]:
    """Every simple import path from ``start`` back to itself (depth-first)."""
    found: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for following in edges.get(node, ()):
            if following == start:
                found.append([*path, start])
            elif following not in path and len(path) < 12:
                walk(following, [*path, following])

    walk(start, [start])
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import one another, directly or not: each strongly connected set of two or
    more (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = lowest[node] = len(order)
        stack.append(node)
        for following in sorted(edges.get(node, ())):
            if following not in order:
                visit(following)
                lowest[node] = min(lowest[node], lowest[following])
            elif following in stack:
                lowest[node] = min(lowest[node], order[following])
        if lowest[node] == order[node]:
            members: list[str] = []
            while not members or members[-1] != node:
                members.append(stack.pop())
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(edges):
        if node not in order:
            visit(node)
    return found


#: The simulation may import in circles: it is a model run by tests, not a layer of the package.
SIMULATION = "django_simba.testing.simulation"


def test_no_import_circle_anywhere_outside_the_simulation():
    edges = {
        name: {module for module in imported if not module.startswith(SIMULATION)}
        for name, imported in graph().items()
        if not name.startswith(SIMULATION)
    }
    found = circles(edges)
    assert found == [], [cycles_through(edges, circle[0])[:3] for circle in found]


def test_the_circle_finder_finds_a_circle_through_a_function_level_import():
    source = "def late():\n    from .backend import Base\n"
    tree = ast.parse(source)
    assert any(isinstance(node, ast.ImportFrom) for node in runtime_nodes(tree))
    edges = {"a.backend": {"a.postgresql"}, "a.postgresql": {"a.backend"}, "a.vendors": {"a.backend"}}
    assert circles(edges) == [["a.backend", "a.postgresql"]]
    assert circles({"a.backend": set(), "a.vendors": {"a.backend"}}) == []


def test_imports_for_the_type_checker_only_make_no_circle():
    tree = ast.parse("import typing\nif typing.TYPE_CHECKING:\n    from .engine import Engine\n")
    assert not any(isinstance(node, ast.ImportFrom) for node in runtime_nodes(tree))


def test_the_database_backends_shared_base_knows_no_vendor():
    """The vendors import their base; only ``vendors`` (the loader's choice) imports the vendors."""
    edges = graph()
    database = "django_simba.backends.database"
    vendors = {f"{database}.{vendor}" for vendor in ("postgresql", "mysql", "sqlite")}
    assert not edges[f"{database}.backend"] & vendors
    assert all(f"{database}.backend" in edges[vendor] for vendor in vendors)
    importers = {name for name, imported in edges.items() if imported & vendors}
    assert importers <= {f"{database}.vendors", database, "django_simba.testing.process"}, importers


def test_the_registry_imports_no_server_hook_signal_or_metric():
    imported = graph()["django_simba.registry"]
    assert not {m for m in imported if m.startswith(("django_simba.servers", "django_simba.integrations"))}
    assert "django_simba.signals" not in imported


def test_apps_py_only_wires():
    source = (PACKAGE / "apps.py").read_text()
    ready = next(
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and node.name == "ready"
    )
    assert len(source.splitlines()) < 60 and len(ready.body) <= 6


def test_the_re_export_modules_are_gone():
    for leftover in ("health.py", "metrics.py", "runner.py", "status.py"):
        assert not (PACKAGE / leftover).exists(), leftover


def django_imports(path: Path) -> set[str]:
    """The Django modules (django, django_redis) ``path`` imports when it runs."""
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return {module for module in found if module.split(".")[0] in {"django", "django_redis"}}


def test_below_the_django_layer_only_the_borrowing_backends_import_django():
    """The engine, the SPI, the memory and ZooKeeper backends import nothing of Django; the database
    backend borrows Django's connections, and the Redis backend a django-redis cache (its ``cache``
    option), and only those modules of theirs do (docs/design.rst)."""
    borrowing = {"backends/redis/options.py", "backends/redis/connection.py"}
    offenders = {}
    for part in ("engine", "spi", "backends/memory", "backends/zookeeper", "backends/redis"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            relative = str(path.relative_to(PACKAGE))
            if relative not in borrowing and django_imports(path):
                offenders[relative] = sorted(django_imports(path))
    assert offenders == {}
