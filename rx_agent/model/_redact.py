"""Keeping an HTTP model's credentials out of what its errors say.

A model error quotes what the server answered (its error body, a malformed event), and
some gateways echo the rejected key there (``"invalid key sk-...: Authorization: Bearer
sk-..."``). A :class:`Redactor` knows the secrets one transport sends (the values of
its credential headers, the password or key its URL carries) and takes them out of a
text, with any bearer or ``Authorization`` value the server quoted, before the text
becomes a :class:`~rx_agent.model.ModelError` message. So the key never reaches a log,
a span, or a server's answer to its own clients, whatever the upstream says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["MARK", "Redactor"]

MARK = "[redacted]"

# Shorter values are not taken for secrets: replacing them would blank ordinary words.
_MIN_SECRET = 4
# A run of this many characters of a secret, inside a longer token, marks that token
# (a gateway that quotes a key cut short, or a prefix glued to something else).
_FRAGMENT = 12

# Header and query-parameter names whose values are credentials.
_CREDENTIAL_NAME = re.compile(
    r"auth|key|token|secret|passw|cookie|signature|credential|session", re.IGNORECASE)
# "Bearer <value>" anywhere in a server's text.
_BEARER = re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE)
# A quoted header or field that carries a credential: "Authorization: Basic x",
# "x-api-key=...", '"api_key": "..."'.
_FIELD = re.compile(
    r"""\b((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|client[-_]?secret)"""
    r"""(["']?\s*[:=]\s*["']?)((?:bearer|basic|token)\s+)?"""
    r"""(?!(?:bearer|basic|token)\s)[^\s"',;&)}\][]+""",
    re.IGNORECASE)
# The tokens searched for fragments of a secret.
_TOKEN = re.compile(rf"[A-Za-z0-9._~+/=-]{{{_FRAGMENT},}}")


class Redactor:
    """The secrets of one transport (``headers`` it sends, the ``url`` it posts to)."""

    __slots__ = ("_fragments", "_secrets", "url")

    def __init__(self, headers: Mapping[str, str], url: str) -> None:
        found: set[str] = set()
        for name, value in headers.items():
            if _CREDENTIAL_NAME.search(name):
                found.update(_header_secrets(value))
        found.update(_url_secrets(url))
        secrets = {s for s in found if len(s) >= _MIN_SECRET}
        # As servers may quote them too: JSON-escaped and percent-encoded.
        variants = {v for s in secrets for v in (json.dumps(s)[1:-1], quote(s, safe=""))}
        self._secrets = sorted(secrets | variants, key=len, reverse=True)
        self._fragments = frozenset(
            s[i:i + _FRAGMENT] for s in secrets for i in range(len(s) - _FRAGMENT + 1))
        self.url = _shown_url(url)
        """``url`` as messages show it: no user or password, credential parameters
        redacted."""

    def secrets(self, text: str) -> str:
        """``text`` without the transport's secrets (whole, or a long piece of one)."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MARK)
        if self._fragments:
            text = _TOKEN.sub(self._token, text)
        return text

    def upstream(self, text: str) -> str:
        """A server's ``text`` without the transport's secrets, nor any bearer token or
        credential header it quotes (a key of another client, say)."""
        text = self.secrets(text)
        text = _BEARER.sub(lambda m: m.group(1) + MARK, text)
        return _FIELD.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + MARK, text)

    def _token(self, match: re.Match[str]) -> str:
        token = match.group()
        fragments = self._fragments
        for i in range(len(token) - _FRAGMENT + 1):
            if token[i:i + _FRAGMENT] in fragments:
                return MARK
        return token


def _header_secrets(value: str) -> Iterable[str]:
    value = value.strip()
    rest = value.partition(" ")[2].strip()
    # "Bearer <key>", "Basic <base64>": the credential, so a quote reads "Bearer [redacted]"
    yield rest or value


def _url_secrets(url: str) -> Iterable[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        yield unquote(parts.password)
        yield parts.password
    elif parts.username:  # https://<token>@host
        yield unquote(parts.username)
        yield parts.username
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _CREDENTIAL_NAME.search(name):
            yield value


def _shown_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return url
    if "@" not in parts.netloc and not parts.query:
        return url  # the common case: nothing to hide
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    query = urlencode([(k, MARK if _CREDENTIAL_NAME.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
