"""The Lua scripts are package files: found through importlib.resources, shipped as package data."""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import resources
from pathlib import Path

import pytest
import redis

from django_simba.backends.redis import scripts
from django_simba.backends.redis.scripts import (
    ALL_SCRIPTS,
    PRELUDE,
    constants_header,
    flags_line,
    includes,
    read_lua,
)

PACKAGE = "django_simba"
LUA_DIR = ("backends", "redis", "lua")
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def lua_files() -> list[str]:
    directory = resources.files(PACKAGE).joinpath(*LUA_DIR)
    return sorted(entry.name for entry in directory.iterdir() if entry.name.endswith(".lua"))


def test_every_file_is_a_registered_script_or_an_included_fragment() -> None:
    files = lua_files()
    registered = {f"{script.name}.lua" for script in ALL_SCRIPTS}
    fragments = {fragment for name in registered for fragment in includes(read_lua(name))}
    assert len(registered) == len(ALL_SCRIPTS)  # names are unique
    assert set(files) == registered | fragments | {PRELUDE}
    assert all(name.startswith("_") for name in fragments | {PRELUDE})
    assert not any(name.startswith("_") for name in registered)


def test_a_script_is_the_constants_the_prelude_its_fragments_and_its_file() -> None:
    for script in ALL_SCRIPTS:
        body = read_lua(f"{script.name}.lua")
        flags = flags_line(body)  # a ``#!lua flags=...`` line must stay first
        fragments = [read_lua(f) for f in includes(body)]
        parts = [flags, constants_header(), read_lua(PRELUDE), *fragments, body[len(flags) :]]
        assert script.source == "".join(parts), script.name
    assert scripts.MARK.source.startswith("#!lua flags=allow-cross-slot-keys\n")


def test_constants_come_from_the_key_layout() -> None:
    header = constants_header()
    assert "local LEASE_PREFIX = 'simba:lease:{'\n" in header
    assert "local RELEASED = 'released'\n" in header
    assert "local IDLE_LEASE_MS = 60000\n" in header  # a number, not a string
    assert scripts.CONSTANTS["SESSION_PREFIX"] == "simba:session:{"


def test_package_data_ships_every_lua_file() -> None:
    """A wheel holds what package-data names: every .lua file must match one of its patterns."""
    patterns = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"][PACKAGE]
    for name in lua_files():
        path = "/".join((*LUA_DIR, name))
        assert any(fnmatch.fnmatch(path, pattern) for pattern in patterns), path


@pytest.mark.redis
def test_redis_compiles_every_script_under_its_registered_sha(raw: redis.Redis) -> None:
    for script in ALL_SCRIPTS:
        assert raw.script_load(script.source) == script.sha, script.name
