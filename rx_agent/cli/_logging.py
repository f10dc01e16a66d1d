"""Logging for the commands that run for a while (``rx-agent serve``, ``rx-agent chat``).

One stderr handler on the root logger at the ``--log-level``, so rx_agent's records (a
failed call's traceback, with its session and run id), the user's own and, for
``serve``, uvicorn's all show. Every line goes through a :class:`Redactor` first: the
bearer tokens the server accepts, the API keys in the environment, and anything shaped
like a credential (``Bearer ...``, ``sk-...``, ``x-api-key: ...``) are replaced by
``[redacted]``, tracebacks included, since an exception message can quote a header.
"""

from __future__ import annotations

import importlib
import logging
import logging.config
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "LOG_LEVELS",
    "REDACTED",
    "ConsoleHandler",
    "RedactingFormatter",
    "Redactor",
    "configure_logging",
    "logging_config",
]

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""The ``--log-level`` choices, quietest first."""

REDACTED = "[redacted]"

# Environment variables whose values are credentials: OPENAI_API_KEY, ANTHROPIC_API_KEY,
# RX_AGENT_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD ...
_SECRET_ENV = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

# A shorter value is no credential worth hiding, and would blank out ordinary words.
_MIN_SECRET = 8

# Shapes of credentials whatever their value; each keeps its label and hides the rest.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE),
     rf"\1\2{REDACTED}"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), f"sk-{REDACTED}"),
    # OPENAI_API_KEY=..., "x-api-key": "...", client_secret: ..., password=...
    (re.compile(r"""([\w-]*(?:api[_-]?key|secret|password))(["']?\s*[:=]\s*["']?)"""
                r"""(?!\[redacted\])[^\s"',;&}]+""", re.IGNORECASE),
     rf"\1\2{REDACTED}"),
)


class Redactor:
    """``redactor(text)``: ``text`` with every known secret and credential shape hidden.

    Args:
        secrets: values to hide wherever they appear (the server's bearer tokens, an
            ``--api-key``); shorter than 8 characters are ignored.
        environ: where to find more (default ``os.environ``): the values of variables
            whose name says key, token, secret or password.
    """

    def __init__(self, secrets: Iterable[str] = (),
                 environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        found = {s for s in secrets if isinstance(s, str)}
        found.update(v for k, v in env.items() if _SECRET_ENV.search(k))
        # Longest first: a secret that contains another is hidden whole.
        kept = sorted((s for s in found if len(s.strip()) >= _MIN_SECRET), key=len,
                      reverse=True)
        self._literal = (re.compile("|".join(re.escape(s) for s in kept)) if kept else None)

    def __call__(self, text: str) -> str:
        if self._literal is not None:
            text = self._literal.sub(REDACTED, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def __repr__(self) -> str:  # never the secrets themselves
        return "Redactor(<secrets>)"


class RedactingFormatter(logging.Formatter):
    """Formats a record (with ``inner``, a formatter class named ``module.Class``, when
    given, e.g. uvicorn's), then hides secrets in the whole text, traceback included."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None,
                 style: Any = "%", *, redactor: Redactor | None = None,
                 inner: str | None = None, **inner_options: Any) -> None:
        super().__init__(fmt, datefmt, style)
        self.redactor = redactor if redactor is not None else Redactor()
        self.inner: logging.Formatter | None = None
        if inner is not None:
            module, _, name = inner.rpartition(".")
            cls = getattr(importlib.import_module(module), name)
            self.inner = cls(fmt, datefmt, style, **inner_options)

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record) if self.inner is not None else super().format(record)
        return self.redactor(text)


class ConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` (or ``sys.stdout``) as it is when a record comes, not as
    it was at setup: tests and embedding programs swap them."""

    def __init__(self, to: str = "stderr") -> None:
        if to not in ("stderr", "stdout"):
            raise ValueError(f"to must be 'stderr' or 'stdout', got {to!r}")
        self._to = to
        super().__init__()

    @property
    def stream(self) -> Any:
        return getattr(sys, self._to)

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ sets it; ignored
        pass


_PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def logging_config(level: str, secrets: Iterable[str] = (), *,
                   uvicorn: bool = False) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` schema of a command's logging.

    With ``uvicorn=True`` it also sets up uvicorn's loggers as uvicorn's default
    does (its formats, the access log on stdout), redacted too: ``rx-agent serve``
    hands it to ``uvicorn.run(log_config=...)``, which applies it in every worker.
    """
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    redactor = Redactor(secrets)  # an object, not strings: dictConfig leaves it alone
    mine = "rx_agent.cli._logging.RedactingFormatter"

    def formatter(fmt: str, inner: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"()": mine, "fmt": fmt, "redactor": redactor}
        if inner is not None:
            spec["inner"] = inner
        return spec

    stderr = {"()": "rx_agent.cli._logging.ConsoleHandler"}
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"app": formatter(_PLAIN_FORMAT)},
        "handlers": {"app": {**stderr, "formatter": "app"}},
        "root": {"handlers": ["app"], "level": level.upper()},
    }
    if uvicorn:
        colored = "uvicorn.logging.DefaultFormatter"
        config["formatters"] = {
            "app": formatter("%(levelprefix)s %(name)s: %(message)s", colored),
            "default": formatter("%(levelprefix)s %(message)s", colored),
            "access": formatter('%(levelprefix)s %(client_addr)s - "%(request_line)s" '
                                "%(status_code)s", "uvicorn.logging.AccessFormatter"),
        }
        config["handlers"].update({
            "default": {**stderr, "formatter": "default"},
            "access": {"()": "rx_agent.cli._logging.ConsoleHandler", "to": "stdout",
                       "formatter": "access"},
        })
        config["loggers"] = {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        }
    return config


def configure_logging(level: str, secrets: Iterable[str] = (), *,
                      uvicorn: bool = False) -> dict[str, Any]:
    """Apply :func:`logging_config` to this process; return the schema (for uvicorn)."""
    config = logging_config(level, secrets, uvicorn=uvicorn)
    logging.config.dictConfig(config)
    return config
