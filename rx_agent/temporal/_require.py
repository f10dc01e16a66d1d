"""How the temporal extra is named in errors."""

from __future__ import annotations

__all__ = ["EXTRA_HINT"]

EXTRA_HINT = "pip install 'rx-agent[temporal]' (from a checkout: pip install -e '.[temporal]')"
