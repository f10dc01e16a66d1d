"""Bearer-token authentication: a token maps to the user id every session key uses.

The user id comes from the token only, never from a request body, so one caller
cannot reach another user's sessions. Tokens are compared in constant time: each
candidate's SHA-256 digest against every known digest with ``hmac.compare_digest``,
without stopping at the first match, so neither the position nor a prefix leaks.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["Authenticator", "TokenAuth", "load_tokens"]

Authenticator = Callable[[str], "str | None"]
"""``auth(token) -> user id`` (``None``: not a valid token)."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenAuth:
    """Bearer tokens mapped to user ids: ``TokenAuth({"s3cret": "alice"})``.

    Call it with a presented token to get the user id, or ``None`` when the token is
    unknown. Only the tokens' SHA-256 digests are kept.
    """

    __slots__ = ("_entries",)

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not isinstance(tokens, Mapping) or not tokens:
            raise ValueError("TokenAuth needs a non-empty mapping of token -> user id")
        entries: list[tuple[bytes, str]] = []
        for token, user in tokens.items():
            if not isinstance(token, str) or len(token) < 8 or token != token.strip():
                raise ValueError("every token must be a str of at least 8 characters "
                                 "without surrounding whitespace")
            if not isinstance(user, str) or not user.strip():
                raise ValueError(f"the user id of a token must be a non-empty str, got {user!r}")
            entries.append((_digest(token), user))
        self._entries = tuple(entries)

    def __call__(self, token: str) -> str | None:
        presented = _digest(token)
        found: str | None = None
        for digest, user in self._entries:  # no early exit: the time is the same for all
            if hmac.compare_digest(presented, digest):
                found = user
        return found

    def __repr__(self) -> str:
        return f"TokenAuth(<{len(self._entries)} tokens>)"


def load_tokens(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``--tokens FILE`` mapping: a JSON object of token -> user id."""
    where = Path(path)
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read the tokens file {str(where)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the tokens file {str(where)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not data or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"the tokens file {str(where)!r} must hold a non-empty JSON object "
                         'of token -> user id, like {"s3cret-token": "alice"}')
    return data
