"""``settings.SIMBA`` merged over defaults into a typed object, read live.

Parsed on first use and cached until ``setting_changed`` fires for ``SIMBA``
(so ``override_settings`` works in tests). Problems are collected as
:class:`SettingProblem` values, which the system checks report with their ids;
:func:`get_settings` raises on the first one, so a bad value never reaches a
thread. One rule for both: :func:`parse_all`. A backend's ``OPTIONS`` are
judged by the backend class itself (``LeaseBackend.options_problems``, without
I/O), and reported under the check id the class names.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.utils.module_loading import import_string

from .backends import BACKEND_ALIASES
from .engine.config import seconds_problem
from .servers.recognise import management_command, program_name
from .spi import ConfigurationError, LeaseBackend, redact, validate_metadata
from .spi.floor import MAX_TOKEN_FLOOR
from .spi.redaction import remember_secrets_in

DEFAULTS: dict[str, Any] = {
    "BACKEND": "database",
    "OPTIONS": {},
    "LEASE_DURATION": 15.0,
    "RENEW_INTERVAL": 5.0,
    "DRIFT": 0.01,
    "PURGE_INTERVAL": 60.0,
    "TIMEOUT": None,  # None: the renew interval
    "AUTOSTART": True,
    "PREFORK_PARENT": None,  # None: recognise gunicorn's --preload master and Celery's prefork main process
    "METADATA": None,  # None: "host=... pid=... program=..." of the process
    "SERVING_COMMANDS": (),  # management commands and programs that serve, besides the known servers
    "TOKEN_FLOOR": 0,  # added to every token: the highest token of the backend moved from
}


@dataclass(frozen=True, slots=True)
class SettingProblem:
    id: str
    message: str
    hint: str


@dataclass(frozen=True, slots=True)
class SimbaSettings:
    backend: str  # dotted path of the backend class
    options: Mapping[str, Any] = field(default_factory=dict)
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    drift: float = 0.01
    purge_interval: float = 60.0
    timeout: float = 5.0
    autostart: bool = True
    prefork_parent: bool | None = None
    metadata: str | None = None
    serving_commands: frozenset[str] = frozenset()
    token_floor: int = 0

    @property
    def backend_alias(self) -> str:
        """The short name of the backend ("database", "redis"...) or its dotted path."""
        for alias, path in BACKEND_ALIASES.items():
            if path == self.backend:
                return alias
        return self.backend

    @property
    def backend_class(self) -> type[LeaseBackend]:
        """The backend's class: what it can do is said by its class attributes, not by its name."""
        return load_backend_class(self.backend)


def default_metadata() -> str:
    """Who this process is, for status tools: host, pid and program (``manage.py runserver``,
    ``gunicorn``...). Never its arguments: a command line can carry a secret."""
    program = program_name(sys.argv) or "python"
    command = management_command(sys.argv)
    if command:
        program = f"{program} {command}"
    text = f"host={socket.gethostname()} pid={os.getpid()} program={program}"
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:1024]


def raw_settings() -> Any:
    """``settings.SIMBA`` as it is written (``{}`` when unset)."""
    return getattr(django_settings, "SIMBA", {})


def _seconds(raw: Mapping[str, Any], key: str, problem_id: str, problems: list[SettingProblem]) -> float:
    value = raw.get(key, DEFAULTS[key])
    problem = seconds_problem(f"SIMBA['{key}']", value, allow_zero=False, allow_none=False)
    if problem is not None:
        problems.append(SettingProblem(problem_id, f"{problem}.", f"Use a number such as {DEFAULTS[key]}."))
        return float(DEFAULTS[key])
    return float(value)


def parse(raw: Any) -> tuple[SimbaSettings | None, list[SettingProblem]]:
    """Turn a raw ``SIMBA`` value into settings and the problems found in it."""
    problems: list[SettingProblem] = []
    if not isinstance(raw, Mapping):
        problems.append(
            SettingProblem(
                "django_simba.E001",
                f"SIMBA must be a dict, not {type(raw).__name__}.",
                "Set SIMBA = {...} in your settings, or remove it to use the defaults.",
            )
        )
        return None, problems
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        problems.append(
            SettingProblem(
                "django_simba.E002",
                f"Unknown SIMBA keys: {', '.join(map(str, unknown))}.",
                f"Valid keys are {', '.join(DEFAULTS)}.",
            )
        )
    backend = _backend_path(raw.get("BACKEND", DEFAULTS["BACKEND"]), problems)
    options = raw.get("OPTIONS", DEFAULTS["OPTIONS"])
    if not isinstance(options, Mapping):
        problems.append(
            SettingProblem(
                "django_simba.E010",
                f"SIMBA['OPTIONS'] must be a dict, not {type(options).__name__}.",
                "Give backend options as a dict, e.g. {'alias': 'default'}.",
            )
        )
        options = {}
    lease = _seconds(raw, "LEASE_DURATION", "django_simba.E004", problems)
    renew = _seconds(raw, "RENEW_INTERVAL", "django_simba.E005", problems)
    if renew > lease / 2 and not any(p.id in ("django_simba.E004", "django_simba.E005") for p in problems):
        problems.append(
            SettingProblem(
                "django_simba.E005",
                f"SIMBA['RENEW_INTERVAL'] ({renew}) must be at most half of LEASE_DURATION ({lease}).",
                "A session must survive one failed keep-alive: renew at most every LEASE_DURATION / 2.",
            )
        )
    drift = raw.get("DRIFT", DEFAULTS["DRIFT"])
    if isinstance(drift, bool) or not isinstance(drift, int | float) or not 0 <= drift < 0.5:
        problems.append(
            SettingProblem(
                "django_simba.E006",
                f"SIMBA['DRIFT'] must be a fraction from 0 to 0.5, not {drift!r}.",
                "The default, 0.01, allows clocks to run 1% apart.",
            )
        )
        drift = DEFAULTS["DRIFT"]
    purge = _seconds(raw, "PURGE_INTERVAL", "django_simba.E007", problems)
    timeout = raw.get("TIMEOUT", DEFAULTS["TIMEOUT"])
    if timeout is None:
        timeout = renew
    elif problem := seconds_problem("SIMBA['TIMEOUT']", timeout, allow_zero=False, allow_none=False):
        problems.append(
            SettingProblem(
                "django_simba.E011",
                f"{problem} (or None).",
                "Leave it unset: every backend call then times out after RENEW_INTERVAL.",
            )
        )
        timeout = renew
    autostart = raw.get("AUTOSTART", DEFAULTS["AUTOSTART"])
    if not isinstance(autostart, bool):
        problems.append(
            SettingProblem(
                "django_simba.E008",
                f"SIMBA['AUTOSTART'] must be True or False, not {autostart!r}.",
                "True starts the keep-alive thread when the app is ready; False starts it on first use.",
            )
        )
        autostart = True
    prefork_parent = raw.get("PREFORK_PARENT", DEFAULTS["PREFORK_PARENT"])
    if prefork_parent is not None and not isinstance(prefork_parent, bool):
        problems.append(
            SettingProblem(
                "django_simba.E016",
                f"SIMBA['PREFORK_PARENT'] must be None, True or False, not {prefork_parent!r}.",
                "Leave it None to recognise the servers' parent processes; True when the process that "
                "loads Django only forks the processes that serve.",
            )
        )
        prefork_parent = None
    metadata = raw.get("METADATA", DEFAULTS["METADATA"])
    if metadata is not None:
        try:
            validate_metadata(metadata)
        except ValueError as error:
            problems.append(
                SettingProblem(
                    "django_simba.E009",
                    f"SIMBA['METADATA'] is invalid: {error}.",
                    "Use a short printable string (at most 1024 characters), or None for the default.",
                )
            )
            metadata = None
    serving_commands = _serving_commands(raw.get("SERVING_COMMANDS", DEFAULTS["SERVING_COMMANDS"]), problems)
    token_floor = _token_floor(raw.get("TOKEN_FLOOR", DEFAULTS["TOKEN_FLOOR"]), problems)
    if backend is None:
        return None, problems
    return (
        SimbaSettings(
            backend=backend,
            options=dict(options),
            lease_duration=lease,
            renew_interval=renew,
            drift=float(drift),
            purge_interval=purge,
            timeout=float(timeout),
            autostart=autostart,
            prefork_parent=prefork_parent,
            metadata=metadata,
            serving_commands=serving_commands,
            token_floor=token_floor,
        ),
        problems,
    )


def _token_floor(value: Any, problems: list[SettingProblem]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_FLOOR:
        problems.append(
            SettingProblem(
                "django_simba.E018",
                f"SIMBA['TOKEN_FLOOR'] must be an int from 0 to 2**62, not {value!r}.",
                "Set it to the highest token of the backend you moved from (manage.py simba_tokens "
                "prints it there), and never lower it.",
            )
        )
        return 0
    return value


def _serving_commands(value: Any, problems: list[SettingProblem]) -> frozenset[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple | set | frozenset) or not all(
        isinstance(name, str) and name and not name.startswith("-") for name in names
    ):
        problems.append(
            SettingProblem(
                "django_simba.E017",
                f"SIMBA['SERVING_COMMANDS'] must be a list of command or program names, not {value!r}.",
                "Name the management commands (e.g. 'run_scheduler') or programs (e.g. 'daphne') whose "
                "processes serve, besides the servers and workers django-simba knows.",
            )
        )
        return frozenset()
    return frozenset(names)


def _backend_path(value: Any, problems: list[SettingProblem]) -> str | None:
    hint = f"Use one of {', '.join(repr(a) for a in BACKEND_ALIASES)}, or the dotted path of a LeaseBackend."
    if not isinstance(value, str) or not value:
        problems.append(
            SettingProblem("django_simba.E003", f"SIMBA['BACKEND'] must be a string, not {value!r}.", hint)
        )
        return None
    path = BACKEND_ALIASES.get(value, value)
    # a dotted path of names: "." or ".x.Y" would reach import_string as a ValueError or TypeError
    if "." not in path or not all(part.isidentifier() for part in path.split(".")):
        problems.append(SettingProblem("django_simba.E003", f"Unknown SIMBA['BACKEND'] {value!r}.", hint))
        return None
    return path


def load_backend_class(path: str) -> type[LeaseBackend]:
    """Import the backend class; a clear ConfigurationError when it cannot be used."""
    try:
        cls = import_string(path)
    except ImportError as error:
        raise ConfigurationError(
            f"cannot import the Simba backend {path!r}: {error} (is its extra installed?)"
        ) from error
    if not (isinstance(cls, type) and issubclass(cls, LeaseBackend)):
        raise ConfigurationError(f"{path!r} is not a subclass of django_simba.spi.LeaseBackend")
    return cls


def remember_secrets(options: Mapping[str, Any]) -> None:
    """Mask the secrets of ``OPTIONS`` (and of the cache they borrow a server from) in every message.

    A driver may quote a piece of a password where nothing says it is one ("port 'ab'" of a
    password ``ab/cd``): known beforehand, it is masked wherever it shows up.
    """
    remember_secrets_in(options)
    cache = options.get("cache")
    if isinstance(cache, str):
        remember_secrets_in(getattr(django_settings, "CACHES", {}).get(cache))


def parse_all(raw: Any) -> tuple[SimbaSettings | None, list[SettingProblem]]:
    """:func:`parse`, and then what the backend class says of its ``OPTIONS``."""
    parsed, problems = parse(raw)
    if parsed is not None:
        problems.extend(backend_problems(parsed))
    return parsed, problems


def backend_problems(parsed: SimbaSettings) -> list[SettingProblem]:
    """The backend class judges its own ``OPTIONS`` (without I/O), under its own check id."""
    remember_secrets(parsed.options)
    try:
        backend_class = load_backend_class(parsed.backend)
    except ConfigurationError as error:
        hint = "Install the backend's extra, e.g. pip install 'django-simba[redis]'."
        return [SettingProblem("django_simba.E003", redact(error), hint)]
    problems = [
        SettingProblem(
            backend_class.options_check_id,
            redact(f"SIMBA['OPTIONS'] do not suit the {parsed.backend_alias} backend: {problem.message}."),
            redact(problem.hint),
        )
        for problem in backend_class.options_problems(parsed.options, timeout=parsed.timeout)
    ]
    lease = backend_class.lease_duration_problem(parsed.lease_duration)
    if lease is not None:
        problems.append(
            SettingProblem("django_simba.E004", f"SIMBA['LEASE_DURATION']: {lease.message}.", lease.hint)
        )
    return problems


_cached: SimbaSettings | None = None


def get_settings() -> SimbaSettings:
    """The current settings; raises ConfigurationError on an invalid ``SIMBA``."""
    global _cached
    if _cached is None:
        parsed, problems = parse_all(raw_settings())
        if problems or parsed is None:
            first = problems[0]
            raise ConfigurationError(f"{first.message} {first.hint} ({first.id})")
        _cached = parsed
    return _cached


def clear_cache() -> None:
    global _cached
    _cached = None
