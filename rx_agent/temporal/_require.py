"""The one check that the ``temporal`` extra is installed."""

from __future__ import annotations

__all__ = ["EXTRA_HINT", "require_temporalio"]

EXTRA_HINT = "pip install -e '.[temporal]' (or pip install 'rx-agent[temporal]')"


def require_temporalio() -> None:
    """Raise an ``ImportError`` naming the extra when ``temporalio`` is missing."""
    try:
        import temporalio  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"rx_agent.temporal needs the temporalio SDK: {EXTRA_HINT}") from exc
