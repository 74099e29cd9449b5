"""The package's metadata: the version is written once, in django_simba.__version__."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import django_simba

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_version_is_written_once_and_the_package_metadata_reads_it():
    config = tomllib.loads(PYPROJECT.read_text())
    assert "version" not in config["project"]
    assert "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "django_simba.__version__"}
    assert importlib.metadata.version("django-simba") == django_simba.__version__
