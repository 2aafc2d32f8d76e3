"""Secrets out of what taskbench records: a URL's password, a query string's token, an argv's ``--auth``.

Every place that writes a URL or a command line to a result, a page or a log goes through here
(``RunConfig.to_dict``, the result's ``command``, a case's argv, the Redis info of a result). The rules
are deliberately wider than the URL grammar: a user's password that reaches a result file in clear
is worse than a user name masked by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "SECRET_OPTIONS", "redact", "redact_argv", "redact_data", "redact_text"]

MASK = "***"
#: options whose value is a secret itself (``up --auth USER:PASSWORD``): the part after the user is masked
SECRET_OPTIONS = frozenset({"--auth"})

# userinfo of a URL in running text: scheme://USERINFO@ (no space, slash or @ in it)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@?#]+)@")
# a query-string parameter that names a secret: ?password=…, &auth_token=…, ;secret=…
_QUERY = re.compile(r"(?P<key>[?&;][^=&;#\s]*(?:pass|pwd|secret|token|auth|cred|key)[^=&;#\s]*=)[^&;#\s]*",
                    re.IGNORECASE)


def _mask_userinfo(userinfo: str) -> str:
    """``user:password`` -> ``user:***``; a lone user part may be a token (``nats://TOKEN@host``): ``***``."""
    user, sep, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if sep else MASK


def redact(url: str) -> str:
    """A URL (one value: an option's, an environment variable's) with its secrets replaced by ``***``.

    Everything between ``scheme://`` and the **last** ``@`` is taken for user information (a password
    may hold an unencoded ``@``, ``/`` or ``?``; masking too much only hides a host), and a query
    parameter naming a password, token, secret or key is masked: ``redis://:pw@h:6379/0`` ->
    ``redis://:***@h:6379/0``, ``unix:///s.sock?password=pw`` -> ``unix:///s.sock?password=***``.
    Text without ``://`` is returned as given.
    """
    start = url.find("://")
    if start < 0:
        return url
    start += 3
    at = url.rfind("@", start)
    if at >= 0:
        url = url[:start] + _mask_userinfo(url[start:at]) + url[at:]
    return _QUERY.sub(lambda m: m.group("key") + MASK, url)


def redact_text(text: str) -> str:
    """Free text (a message, a log line) with the userinfo of every URL in it and every secret query
    parameter masked."""
    text = _USERINFO.sub(lambda m: m.group("scheme") + _mask_userinfo(m.group("userinfo")) + "@", text)
    return _QUERY.sub(lambda m: m.group("key") + MASK, text)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line as typed, with every URL's secrets masked (``--redis-url URL``, ``--x=URL``, a bare
    URL argument) and the value of an option in :data:`SECRET_OPTIONS` reduced to its user part."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next:
            out.append(_mask_credential(arg))
            secret_next = False
            continue
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and name in SECRET_OPTIONS:
            out.append(f"{name}={_mask_credential(value)}")
            continue
        if arg in SECRET_OPTIONS:
            secret_next = True
        out.append(redact(arg) if "://" in arg else arg)
    return out


def _mask_credential(value: str) -> str:
    user, sep, _ = value.partition(":")
    return f"{user}:{MASK}" if sep else MASK


def redact_data(data: Any) -> Any:
    """JSON-like data (dicts, lists, strings) with every string that holds a URL redacted."""
    if isinstance(data, str):
        return redact(data) if "://" in data else data
    if isinstance(data, dict):
        return {key: redact_data(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(value) for value in data]
    return data
