"""What ``redact`` needs to know of a pattern to stream safely.

For each pattern: the longest text it can match (plus what its lookaheads read), the
context its lookbehinds need, and the set of characters a match can contain. A match
that more text could still change must lie in the trailing run of those characters
(at most the longest match), so only that run is held back: "hello, my key is sk-ab"
holds back "sk-ab", not the whole sentence.

Read from Python's own regex parser (``re._parser``, stable since 3.11).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_PATTERNS", "Rule", "rules"]

_parser: Any = importlib.import_module("re._parser")
_MAXREPEAT: int = importlib.import_module("re._constants").MAXREPEAT

_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W",
}
_ANCHORS = {"AT_BEGINNING", "AT_BEGINNING_STRING", "AT_END", "AT_END_STRING"}
_ANY = None  # "any character": the run is bounded by the longest match only


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if i % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


# Bounded on purpose: the hold-back of a streamed block never exceeds the longest match.
DEFAULT_PATTERNS: tuple[tuple[str, str, Any], ...] = (
    ("email", r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}", None),
    ("api key",
     r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{16,200}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,200}"
     r"|xox[abprs]-[A-Za-z0-9-]{10,200}|AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])", None),
    # 13 to 19 digits, optionally grouped by single spaces or dashes, passing Luhn's check.
    ("card number", r"(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])", _luhn),
)


@dataclass(frozen=True, slots=True)
class Rule:
    regex: re.Pattern[str]
    longest: int  # characters a match and its lookaheads can read
    behind: int  # characters of context its lookbehinds need
    run: re.Pattern[str] | None  # matches the characters a match can hold; None: any
    check: Any = None  # extra test of a matched text (Luhn for card numbers)

    def held(self, text: str) -> int:
        """How many trailing characters of ``text`` a match still in progress could
        use: the trailing run of characters a match can hold, at most ``longest``."""
        tail = text[-self.longest:]
        if self.run is None:
            return len(tail)
        found = self.run.match(tail[::-1])
        return found.end() if found is not None else 0


class _Walk:
    def __init__(self, source: str) -> None:
        self.source = source
        self.atoms: list[str] | None = []
        self.ahead = 0
        self.behind = 0

    def any(self) -> None:
        self.atoms = _ANY

    def atom(self, text: str) -> None:
        if self.atoms is not None:
            self.atoms.append(text)

    def items(self, sub: Any) -> None:
        for op, av in sub:
            self.item(str(op), av)

    def item(self, op: str, av: Any) -> None:
        if op == "LITERAL":
            self.atom(re.escape(chr(av)))
        elif op in ("NOT_LITERAL", "ANY"):
            self.any()
        elif op == "IN":
            self.charset(av)
        elif op == "SUBPATTERN":
            self.items(av[-1])
        elif op in ("ATOMIC_GROUP",):
            self.items(av)
        elif op == "BRANCH":
            for sub in av[1]:
                self.items(sub)
        elif op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            self.items(av[2])
        elif op in ("ASSERT", "ASSERT_NOT"):
            direction, sub = av
            width = sub.getwidth()[1]
            if width >= _MAXREPEAT:
                raise ValueError(f"redact(): the lookaround in {self.source!r} is unbounded")
            if direction > 0:
                self.ahead = max(self.ahead, width)
            else:
                self.behind = max(self.behind, width)
            self.items(sub)
        elif op == "AT":
            name = str(av)
            if name in _ANCHORS:
                raise ValueError(
                    f"redact(): {self.source!r} uses an anchor (^, $, \\A or \\Z), which "
                    "cannot be decided inside streamed text")
            if name in ("AT_BOUNDARY", "AT_NON_BOUNDARY"):
                self.ahead = max(self.ahead, 1)
                self.behind = max(self.behind, 1)
        elif op == "GROUPREF_EXISTS":
            self.items(av[1])
            if av[2] is not None:
                self.items(av[2])
        elif op != "GROUPREF":  # a back-reference repeats characters already counted
            self.any()

    def charset(self, items: Any) -> None:
        for op, av in items:
            name = str(op)
            if name == "NEGATE":
                self.any()
                return
            if name == "LITERAL":
                self.atom(re.escape(chr(av)))
            elif name == "RANGE":
                self.atom(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
            elif name == "CATEGORY" and str(av) in _CATEGORIES:
                self.atom(_CATEGORIES[str(av)])
            else:
                self.any()
                return


def rule(pattern: str | re.Pattern[str], check: Any = None) -> Rule:
    if isinstance(pattern, str):
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"redact(): {pattern!r} is not a valid regular expression: "
                             f"{exc}") from exc
    elif isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        regex = pattern
    else:
        raise TypeError(f"redact(): a pattern is a str or a compiled str pattern, not "
                        f"{type(pattern).__name__}")
    parsed = _parser.parse(regex.pattern, regex.flags)
    low, high = parsed.getwidth()
    if low == 0:
        raise ValueError(f"redact(): {regex.pattern!r} can match empty text")
    walk = _Walk(regex.pattern)
    walk.items(parsed)
    run = None
    if walk.atoms is not None:
        # Case-insensitive on purpose: a superset of the characters is still safe.
        run = re.compile(f"[{''.join(walk.atoms)}]*",
                         re.IGNORECASE | (regex.flags & re.ASCII))
    if high >= _MAXREPEAT and run is None:
        raise ValueError(
            f"redact(): {regex.pattern!r} can match text of any length made of any "
            "characters, so a streamed block would be held back whole; bound its repeats "
            "(e.g. {1,64}) or its characters")
    longest = high + walk.ahead if high < _MAXREPEAT else _MAXREPEAT
    return Rule(regex, longest, walk.behind, run, check)


def rules(patterns: Any) -> tuple[Rule, ...]:
    if patterns is None:
        return tuple(rule(p, check) for _, p, check in DEFAULT_PATTERNS)
    if isinstance(patterns, (str, re.Pattern)):
        patterns = [patterns]
    try:
        items = list(patterns)
    except TypeError:
        raise TypeError(f"redact(): patterns must be a list of regular expressions, not "
                        f"{type(patterns).__name__}") from None
    if not items:
        raise ValueError("redact(): patterns is empty (None means the default patterns)")
    return tuple(rule(p) for p in items)
