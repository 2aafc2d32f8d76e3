"""Secrets out of what taskbench records: a URL's password, a query string's token, an argv's ``--auth``.

Every place that writes a URL or a command line to a result, a page, a log or the terminal goes through
here: every string field of a result model (``taskbench.results.model.Model``), the lines a run prints
(its ``say``), a one-line error (``cli._common.fail``), a case's argv. The rules are deliberately wider
than the URL grammar: a user's password that reaches a result file in clear is worse than a user name
masked by mistake.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote_plus

__all__ = ["MASK", "SECRET_NAMES", "SECRET_OPTIONS", "redact", "redact_argv", "redact_data", "redact_text",
           "redact_value", "secret_name"]

MASK = "***"
#: options whose value is a secret itself (``up --auth USER:PASSWORD``): the part after the user is masked
SECRET_OPTIONS = frozenset({"--auth"})
#: a query or fragment parameter whose (decoded, lower-cased) name holds one of these names a secret:
#: ``api_key``, ``X-Amz-Signature``, ``access_token``, ``Authorization``, ``client_secret``, ``sessionid``
SECRET_NAMES = ("pass", "pwd", "secret", "token", "auth", "cred", "key", "sig", "session", "jwt", "bearer",
                "private", "hmac", "otp")

# a URL in running text: a scheme, ``://`` and everything up to the next white space, but for the
# punctuation that ends a clause ("…?token=t, closed model" keeps its comma)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*?(?=[,.;:!?)\]'\"]*(?:\s|$))")
# a value that is one URL (an option's, a field's): masked as a whole, so a password may hold a space
_STARTS_WITH_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")
# one parameter of a query string or a fragment: ?name=value, &name=value, ;name=value, #name=value
_PARAM = re.compile(r"(?P<head>[?&;#](?P<name>[^=&;#\s?]+)=)(?P<value>[^&;#\s]*)")
# the same in running text, where a value stops short of the punctuation that ends a clause
_TEXT_PARAM = re.compile(r"(?P<head>[?&;#](?P<name>[^=&;#\s?]+)=)(?P<value>[^&;#\s]*?)(?=[,.;:!?)\]'\"]*(?:[&;#\s]|$))")


def secret_name(name: str) -> bool:
    """Whether a query parameter called ``name`` holds a secret (percent-encoding and case ignored)."""
    plain = unquote_plus(name).lower()
    return any(word in plain for word in SECRET_NAMES)


def _mask_params(text: str, pattern: re.Pattern[str] = _PARAM) -> str:
    return pattern.sub(lambda m: m.group("head") + MASK if secret_name(m.group("name")) else m.group(), text)


def _mask_userinfo(userinfo: str) -> str:
    """``user:password`` -> ``user:***``; a lone user part may be a token (``nats://TOKEN@host``): ``***``."""
    user, sep, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if sep else MASK


def redact(url: str) -> str:
    """A URL (one value: an option's, an environment variable's) with its secrets replaced by ``***``.

    Everything between ``scheme://`` and the **last** ``@`` is taken for user information (a password
    may hold an unencoded ``@``, ``/`` or ``?``; masking too much only hides a host), and a query or
    fragment parameter whose name holds one of :data:`SECRET_NAMES` is masked: ``redis://:pw@h:6379/0``
    -> ``redis://:***@h:6379/0``, ``http://h:1/o?api_key=k`` -> ``http://h:1/o?api_key=***``.
    Text without ``://`` is returned as given.
    """
    start = url.find("://")
    if start < 0:
        return url
    start += 3
    at = url.rfind("@", start)
    if at >= 0:
        url = url[:start] + _mask_userinfo(url[start:at]) + url[at:]
    return _mask_params(url)


def redact_text(text: str) -> str:
    """Free text (a message, a log line, a shell command) with every URL in it redacted (each one up to
    the next white space) and every secret parameter of a query string masked."""
    return _mask_params(_URL.sub(lambda m: redact(m.group()), text), _TEXT_PARAM)


def redact_value(value: str) -> str:
    """One string of a result or a command line: :func:`redact` when it is a URL, else :func:`redact_text`
    (a label such as ``target http://…``, a ``--worker-cmd`` that sets ``REDIS_URL=redis://…``)."""
    if "://" not in value:
        return value
    return redact(value) if _STARTS_WITH_URL.match(value) else redact_text(value)


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
        # ``--target=URL``: the value is one URL, though the argument does not start with it
        out.append(f"{name}={redact_value(value)}" if arg.startswith("--") and eq else redact_value(arg))
    return out


def _mask_credential(value: str) -> str:
    user, sep, _ = value.partition(":")
    return f"{user}:{MASK}" if sep else MASK


def redact_data(data: Any) -> Any:
    """JSON-like data (dicts, lists, strings) with every string that holds a URL redacted
    (:func:`redact_value`), keys included."""
    if isinstance(data, str):
        return redact_value(data)
    if isinstance(data, dict):
        return {redact_data(key): redact_data(value) for key, value in data.items()}
    if isinstance(data, list):
        return [redact_data(value) for value in data]
    if isinstance(data, tuple):
        return tuple(redact_data(value) for value in data)
    return data
