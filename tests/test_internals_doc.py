"""docs/internals.md is checked against the code: every module it names exists, every
module of the agent layer has its row in the "One call, in modules" table, and the
number of events it gives is the number there are."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from rx_agent.event import AnyEvent

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "rx_agent"


def _named_paths() -> set[str]:
    # `agent/_loop.py`, `rx_agent/_rx/`, `tests/test_layers.py`; not the ones the text
    # introduces as a module a reader would add ("is a new module (`session/_x.py`").
    found = set(re.findall(r"`((?:rx_agent/)?[A-Za-z_]+(?:/[A-Za-z_]+)*(?:\.py|/))`", TEXT))
    new = set(re.findall(r"\ba new module \(`([^`]+)`", TEXT))
    return found - new


def _exists(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT, PACKAGE))


def test_every_module_the_page_names_exists() -> None:
    missing = sorted(p for p in _named_paths() if not _exists(p))
    assert not missing, f"docs/internals.md names modules that do not exist: {missing}"


def test_every_agent_module_has_its_row() -> None:
    table = TEXT.split("### One call, in modules", 1)[1].split("\n\n", 2)[1]
    rows = set(re.findall(r"^\| `(agent/[a-z_]+\.py)`", table, flags=re.MULTILINE))
    modules = {f"agent/{p.name}" for p in (PACKAGE / "agent").glob("*.py")
               if p.name != "__init__.py"}
    assert sorted(modules - rows) == [], "agent modules without a row in docs/internals.md"


def test_the_event_count_is_the_number_of_events() -> None:
    union = typing.get_args(typing.get_args(AnyEvent)[0])
    [count] = re.findall(r"the (\d+) events", TEXT)
    assert int(count) == len(union)
