"""``python -m rx_agent ...``: the same as the ``rx-agent`` console script."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
