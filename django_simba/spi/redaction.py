"""Credentials out of every message: what an exception, a log line, a check, a command or a page says.

:func:`redact` masks what a message may carry of a secret, and when it cannot tell
where a secret ends it masks more rather than less:

* the user information of a URL (``redis://:s3cret@host`` reads ``redis://:***@host``;
  a user name alone before the ``@``, as ``redis://s3cret@host`` may be, is masked
  too). A password may hold ``/``, ``@`` or a space (unencoded, exactly what a driver
  refuses): everything up to the last ``@`` before a host on the URL's line is masked;
* the value of a key that names a secret, in a dict's repr, JSON or ``key=value``
  text (a DSN, keyword arguments): ``password``, ``passwd``, ``pwd``, ``ssl_password``,
  ``keyfile_password``, ``sasl_password``, anything with ``secret`` or ``passphrase`` in
  its name, ``api_key``, ``access_token``, ``auth_token``...;
* credentials of auth tuples: under a key named ``auth`` (``[("digest", "user:pw")]``,
  ``auth=("user", "pw")``) everything but the scheme, the first item of each; a ZooKeeper
  digest pair anywhere (``("digest", "user:***")``, ``digest user:***``);
* every secret seen before, wherever it shows up again, whole or in the pieces a parser
  splits it into (``'s3cr'`` of ``s3cr/et``, as a driver's "port" error quotes it): the
  secrets of the settings (:func:`remember_secrets_in`, called when ``SIMBA`` is read)
  and those this function masked in a URL or a pair.

Host names, ports, database numbers and user names stay: they say what failed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"

#: Keys whose value is a secret.
_SECRET_KEY = (
    r"(?:\w*(?:password|passwd|passphrase|secret)\w*|pwd|\w*_pwd|"
    r"(?:access|auth|api|bearer|refresh|session)_?(?:token|key)|credentials?)"
)
_AUTH_KEY = r"(?:auth|auth_data)"
#: What every key of ``_SECRET_KEY`` contains (lower case): no pair is looked for in a message without.
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "key", "credential")
_QUOTED = r"(?P<q>['\"])(?:\\.|(?!(?P=q)).)*(?P=q)"

_SCHEME = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://")
#: The ``@`` that ends a URL's user information: a host (a name, an IPv4 or IPv6 address) follows.
_USERINFO_END = re.compile(r"@(?=[\w\[])")
_UNSAFE_USER = re.compile(r"[/@\s'\"]")
_QUOTED_PAIR = re.compile(
    r"(?P<key>(?P<kq>['\"])" + _SECRET_KEY + r"(?P=kq)\s*:\s*)(?:b?" + _QUOTED + r"|[^\s,}\]]+)",
    re.IGNORECASE,
)
_PLAIN_PAIR = re.compile(
    r"(?P<key>\b" + _SECRET_KEY + r"\s*=\s*)(?:b?" + _QUOTED + r"|[^\s&;,)\]}]+)", re.IGNORECASE
)
_AUTH = re.compile(
    r"(?:(?P<kq>['\"])" + _AUTH_KEY + r"(?P=kq)\s*:|\b" + _AUTH_KEY + r"\s*=)\s*", re.IGNORECASE
)
_DIGEST = re.compile(
    r"(?P<head>['\"]?digest['\"]?\s*,\s*(?P<q>['\"])[^:'\"]*:)(?P<secret>(?:\\.|(?!(?P=q)).)*)(?P=q)",
    re.IGNORECASE,
)
_DIGEST_WORDS = re.compile(r"(?P<head>\bdigest\s+[^:\s'\"]+:)(?P<secret>\S+)", re.IGNORECASE)
#: Where a parser splits a secret it reads as a URL: a piece may appear alone in its error.
_PIECES = re.compile(r"[/:@?#\[\]\s'\"]+")

#: Shorter pieces are masked only where quoted alone (a word of two letters is not worth hiding).
_SHORTEST_PIECE = 3
#: Values that stand for no secret: never remembered (they would be masked in every message).
_NO_SECRETS = frozenset({"", "None", "null", "True", "False", "true", "false", MASK})
#: How many secrets learnt from messages are kept (the settings' are all kept).
_MOST_LEARNT = 64


class Found:
    """Secrets found in a message or the settings: ``pieced`` ones are masked in their pieces too."""

    def __init__(self) -> None:
        self.pieced: list[str] = []
        self.whole: list[str] = []

    def secret(self, text: str) -> None:
        if text in _NO_SECRETS:
            return  # a value that says there is none (password=None), masked where it stands only
        # A secret with a space in it may be a guess that ran on into the words after it (a URL's
        # user information up to an @ further on): masked whole only, never its pieces everywhere.
        (self.whole if re.search(r"\s", text) else self.pieced).append(text)

    def credential(self, text: str) -> None:
        """``user:password`` (a digest credential), or a credential alone."""
        _, colon, password = text.partition(":")
        self.whole.append(text)
        self.secret(password if colon else text)


class _Known:
    """The secrets seen so far, and one pattern that finds them (rebuilt when one is added)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._configured: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        self._learnt: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        #: (text, the pattern that masks it): a pattern runs only on a message that holds its text.
        self.patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def add(self, found: Found, *, configured: bool) -> None:
        pieced = {s for s in found.pieced if s and s != MASK}
        whole = {s for s in found.whole if s and s != MASK}
        known = self._configured[0] | self._configured[1] | self._learnt[0] | self._learnt[1]
        if not (pieced | whole) - known:
            return
        with self._lock:
            if configured:
                self._configured = (self._configured[0] | pieced, self._configured[1] | whole)
            else:
                room = _MOST_LEARNT - len(self._learnt[0]) - len(self._learnt[1])
                if room <= 0:
                    return
                self._learnt = (
                    self._learnt[0] | set(list(pieced)[:room]),
                    self._learnt[1] | set(list(whole)[: max(0, room - len(pieced))]),
                )
            pieced_all = self._configured[0] | self._learnt[0]
            self.patterns = _patterns_for(pieced_all | self._configured[1] | self._learnt[1], pieced_all)


def _patterns_for(secrets: frozenset[str], pieced: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each secret where it stands, and each piece of the ``pieced`` ones where it stands alone;
    longest first, so that a secret is masked whole before its pieces are looked for."""
    found: dict[str, str] = {}
    for secret in pieced:
        for piece in filter(None, _PIECES.split(secret)):
            found[piece] = _alone(piece) if len(piece) >= _SHORTEST_PIECE else _quoted_alone(piece)
    for secret in secrets:
        found[secret] = re.escape(secret) if len(secret) > _SHORTEST_PIECE else _alone(secret)
    ordered = sorted(found.items(), key=lambda item: len(item[0]), reverse=True)
    return tuple((text, re.compile(pattern)) for text, pattern in ordered)


def _alone(text: str) -> str:
    return rf"(?<![A-Za-z0-9]){re.escape(text)}(?![A-Za-z0-9])"


def _quoted_alone(text: str) -> str:
    return rf"(?<=['\"]){re.escape(text)}(?=['\"])"


_known = _Known()


def redact(text: object) -> str:
    """``text`` (or ``str()`` of it: an exception, say) with every credential masked."""
    message = str(text)
    learnt = Found()
    lowered = message.lower()  # each rule runs only where its words are: most messages have none
    if "://" in message:
        message = _mask_urls(message, learnt)
    if any(word in lowered for word in _SECRET_WORDS):
        message = _QUOTED_PAIR.sub(lambda m: _masked_pair(m, learnt), message)
        message = _PLAIN_PAIR.sub(lambda m: _masked_pair(m, learnt), message)
    if "auth" in lowered:
        message = _mask_auth(message, learnt)
    if "digest" in lowered:
        message = _DIGEST.sub(lambda m: _masked_digest(m, learnt), message)
        message = _DIGEST_WORDS.sub(lambda m: _masked_digest(m, learnt), message)
    _known.add(learnt, configured=False)
    for text, pattern in _known.patterns:
        if text in message:  # a plain search first: most messages hold none of them
            message = pattern.sub(MASK, message)
    return message


def remember_secrets_in(value: Any) -> None:
    """Mask from now on every secret found in ``value`` (settings: dicts, lists, URLs), wherever it is."""
    found = Found()
    _collect(value, found)
    _known.add(found, configured=True)


def _collect(value: Any, found: Found, key: str = "") -> None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if re.fullmatch(_SECRET_KEY, key, re.IGNORECASE):
            found.secret(value)
        else:
            _mask_urls(value, found, users_too=True)
        return
    if isinstance(value, Mapping):
        for name, item in value.items():
            if re.fullmatch(_AUTH_KEY, str(name), re.IGNORECASE) and isinstance(item, list | tuple):
                _collect_auth(item, found)
            else:
                _collect(item, found, str(name))
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(item, found, key)


def _collect_auth(entries: list[Any] | tuple[Any, ...], found: Found) -> None:
    """Credentials of auth tuples: all but the scheme (a lone pair ``(scheme, credential)`` too)."""
    pairs = entries if all(isinstance(e, list | tuple) for e in entries) else [entries]
    for entry in pairs:
        for credential in list(entry)[1:]:
            if isinstance(credential, str | bytes):
                text = credential.decode("utf-8", "replace") if isinstance(credential, bytes) else credential
                found.credential(text)


def _mask_urls(message: str, learnt: Found, *, users_too: bool = False) -> str:
    """Mask each URL's user information: up to the last ``@`` before a host on the URL's line.

    Its password is remembered; a user name alone (maybe a password) only with ``users_too`` (the
    settings): remembered from any message, a plain ``redis://default@host`` would mask "default"
    in every message after it.
    """
    schemes = list(_SCHEME.finditer(message))
    if not schemes:
        return message
    parts: list[str] = []
    kept = 0
    for index, scheme in enumerate(schemes):
        start = scheme.end()
        if start < kept:
            continue
        line_end = message.find("\n", start)
        end = min(
            len(message) if line_end < 0 else line_end,
            schemes[index + 1].start() if index + 1 < len(schemes) else len(message),
        )
        ends = list(_USERINFO_END.finditer(message, start, end))
        if not ends:
            continue
        userinfo = message[start : ends[-1].start()]
        user, colon, password = userinfo.partition(":")
        if colon and not _UNSAFE_USER.search(user):
            learnt.secret(password)
            shown = f"{user}:{MASK}"
        else:
            shown = MASK  # a user alone may be a password (redis://s3cret@host)
            if users_too:
                learnt.secret(userinfo)
        parts += [message[kept:start], shown]
        kept = ends[-1].start()
    return "".join(parts) + message[kept:]


def _masked_pair(match: re.Match[str], learnt: Found) -> str:
    value = match.group(0)[len(match.group("key")) :]
    quote = match.group("q")
    if quote:
        prefix = value[: value.index(quote) + 1]  # b' or '
        learnt.secret(value[len(prefix) : -1])
        return f"{match.group('key')}{prefix}{MASK}{quote}"
    learnt.secret(value)
    return f"{match.group('key')}{MASK}"


def _masked_digest(match: re.Match[str], learnt: Found) -> str:
    learnt.secret(match.group("secret"))
    return f"{match.group('head')}{MASK}{match.groupdict().get('q') or ''}"


def _mask_auth(message: str, learnt: Found) -> str:
    """Under an ``auth`` key, every quoted item but the first of its tuple (the scheme)."""
    parts: list[str] = []
    kept = 0
    for key in _AUTH.finditer(message):
        start = key.end()
        if start < kept or start >= len(message) or message[start] not in "([":
            continue
        end, masked = _masked_structure(message, start, learnt)
        parts += [message[kept:start], masked]
        kept = end
    return "".join(parts) + message[kept:]


def _masked_structure(message: str, start: int, learnt: Found) -> tuple[int, str]:
    """The bracketed value at ``start`` with its credentials masked, and where it ends.

    Unclosed (a message cut short): masked to the end of its line.
    """
    items: list[int] = []  # per open bracket: the index of the item being read
    out: list[str] = []
    position = start
    while position < len(message):
        char = message[position]
        if char in "'\"":
            closing = re.compile(r"(?:\\.|[^\\" + char + r"])*" + char).match(message, position + 1)
            if closing is None:
                break
            end = closing.end()
            text = message[position + 1 : end - 1]
            if items and items[-1] > 0:
                learnt.credential(text)
                user, colon, _ = text.partition(":")
                text = f"{user}:{MASK}" if colon and not _UNSAFE_USER.search(user) else MASK
            out.append(f"{char}{text}{char}")
            position = end
            continue
        if char in "([":
            items.append(0)
        elif char in ")]":
            items.pop()
        elif char == "," and items:
            items[-1] += 1
        elif char == "\n":
            break
        out.append(char)
        position += 1
        if not items:
            return position, "".join(out)
    line_end = message.find("\n", start)
    end = len(message) if line_end < 0 else line_end
    return end, MASK


__all__ = ["MASK", "redact", "remember_secrets_in"]
