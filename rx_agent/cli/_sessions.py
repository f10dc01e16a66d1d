"""``rx-agent sessions list|show|delete``: what a session store holds.

The commands use the stores' synchronous methods (``list_sessions``,
``load_versioned``, ``delete``). They never create a database: a default SQLite
file that does not exist yet holds no sessions. ``--json`` prints one JSON document
on stdout; errors go to stderr as one line, whatever the format.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..session import SessionCorruptError, SessionKey
from ._base import EXIT_FAILURE, EXIT_OK, CLIError, error, make_console, one_line
from ._render import clip
from ._store import (
    StoreChoice,
    choose_store,
    close_store,
    key_for,
    open_store,
    show_user,
    store_errors,
)

if TYPE_CHECKING:
    from rich.text import Text

    from ..context import AgentState
    from ._store import AnyStore

__all__ = ["cmd_sessions_delete", "cmd_sessions_list", "cmd_sessions_show"]


def _print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat(timespec="seconds")


def _local(ts: float | None) -> str:
    if ts is None:
        return "—"
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _last_at(state: AgentState) -> float | None:
    # The stores keep no public "updated at"; the newest message is as close.
    return max((m.created_at for m in state.context), default=None)


# -- rx-agent sessions list ------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    key: SessionKey
    count: int = 0
    version: int = 0
    last_at: float | None = None
    paused: str | None = None
    problem: str | None = None  # the record could not be read

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"user_id": self.key.user_id, "session_id": self.key.session_id}
        if self.problem is not None:
            doc["error"] = self.problem
            return doc
        doc.update(message_count=self.count, version=self.version,
                   last_message_at=_iso(self.last_at), paused=self.paused)
        return doc


def _rows(store: AnyStore, user: str | None) -> list[_Row]:
    rows = []
    for key in store.list_sessions(user):
        row = _Row(key)
        try:
            state, row.version = store.load_versioned(key)
        except SessionCorruptError as exc:
            # One unreadable record does not hide the others; the command still fails.
            row.problem = one_line(exc)
            rows.append(row)
            continue
        if state is None:  # deleted between the listing and the load
            continue
        row.count = len(state.context)
        row.last_at = _last_at(state)
        row.paused = state.pending.kind if state.pending is not None else None
        rows.append(row)
    return rows


def cmd_sessions_list(args: argparse.Namespace) -> int:
    choice = choose_store(args.store)
    store = open_store(choice, create=False)
    try:
        with store_errors(choice):
            rows = [] if store is None else _rows(store, args.user)
    finally:
        close_store(store)
    broken = [r for r in rows if r.problem is not None]
    if args.json:
        _print_json({"store": choice.shown, "user_filter": args.user,
                     "sessions": [r.to_json() for r in rows]})
    else:
        _list_table(args, choice, rows, exists=store is not None)
    if broken:
        names = ", ".join(repr(r.key.session_id) for r in broken)
        error(f"{len(broken)} session(s) cannot be read: {names}; `rx-agent sessions show "
              "SESSION` says what is wrong")
        return EXIT_FAILURE
    return EXIT_OK


def _list_table(
    args: argparse.Namespace, choice: StoreChoice, rows: list[_Row], *, exists: bool
) -> None:
    console = make_console(args.no_color)
    whose = f" of user {args.user!r}" if args.user is not None else ""
    if not rows:
        later = "" if exists else f" ({choice.path} does not exist yet)"
        console.print(f"no sessions{whose} in {choice.shown}{later}", markup=False,
                      soft_wrap=True)
        return
    from rich.table import Table

    # A heading, not a title: a title wraps to the table's width, and a long URL with it.
    console.print(f"Sessions{whose} in {choice.shown}", style="bold", markup=False,
                  soft_wrap=True)
    table = Table(caption=f"{len(rows)} session(s)", caption_justify="left")
    table.add_column("user")
    table.add_column("session", style="bold")
    table.add_column("messages", justify="right")
    table.add_column("last message")
    for row in rows:
        if row.problem is not None:
            table.add_row(show_user(row.key.user_id), row.key.session_id,
                          "[red]unreadable[/]", "—")
            continue
        count = str(row.count) + (f" (paused: {row.paused})" if row.paused else "")
        table.add_row(show_user(row.key.user_id), row.key.session_id, count,
                      _local(row.last_at))
    console.print(table)


# -- rx-agent sessions show / delete ---------------------------------------------------


def _resolve(store: AnyStore | None, choice: StoreChoice, session: str,
             user: str | None) -> SessionKey:
    """The key of ``session``: for ``user``, or for whichever single user has it."""
    where = f"in {choice.shown}"
    if store is None:
        raise CLIError(f"no session {session!r} {where} ({choice.path} does not exist yet)",
                       EXIT_FAILURE)
    if user is not None:
        return key_for(user, session)
    matches = [k for k in store.list_sessions() if k.session_id == session]
    if not matches:
        raise CLIError(f"no session {session!r} {where} (`rx-agent sessions list` shows "
                       "what there is)", EXIT_FAILURE)
    if len(matches) > 1:
        users = ", ".join(repr(k.user_id) for k in matches)
        raise CLIError(f"session {session!r} exists for several users ({users}) {where}: "
                       "pass --user USER")
    return matches[0]


def _missing(key: SessionKey, choice: StoreChoice) -> CLIError:
    return CLIError(f"no session {key.session_id!r} of user {show_user(key.user_id)} in "
                    f"{choice.shown} (`rx-agent sessions list` shows what there is)",
                    EXIT_FAILURE)


def cmd_sessions_show(args: argparse.Namespace) -> int:
    choice = choose_store(args.store)
    store = open_store(choice, create=False)
    try:
        with store_errors(choice):
            key = _resolve(store, choice, args.session, args.user)
            assert store is not None
            state, version = store.load_versioned(key)
    finally:
        close_store(store)
    if state is None:
        raise _missing(key, choice)
    if args.json:
        _print_json({"store": choice.shown, "user_id": key.user_id,
                     "session_id": key.session_id, "version": version,
                     "message_count": len(state.context),
                     "state": state.model_dump(mode="json")})
        return EXIT_OK
    _show_table(args, key, state, version)
    return EXIT_OK


def cmd_sessions_delete(args: argparse.Namespace) -> int:
    choice = choose_store(args.store)
    store = open_store(choice, create=False)
    try:
        with store_errors(choice):
            key = _resolve(store, choice, args.session, args.user)
            assert store is not None
            deleted = store.delete(key)
    finally:
        close_store(store)
    if not deleted:
        raise _missing(key, choice)
    if args.json:
        _print_json({"store": choice.shown, "user_id": key.user_id,
                     "session_id": key.session_id, "deleted": True})
    else:
        sys.stdout.write(f"deleted session {key.session_id!r} of user "
                         f"{show_user(key.user_id)} from {choice.shown}\n")
        sys.stdout.flush()
    return EXIT_OK


def _show_table(args: argparse.Namespace, key: SessionKey, state: AgentState,
                version: int) -> None:
    from rich.table import Table

    console = make_console(args.no_color)
    caption = f"{len(state.context)} message(s) · version {version}"
    if state.pending is not None:
        names = ", ".join(c.name for c in state.pending.tool_calls)
        what = "confirmation of" if state.pending.kind == "confirm" else "external execution of"
        caption += f" · paused, waiting for {what} {names}"
    # The day in the heading, the time of day in the rows: the content gets the width.
    day = _local(state.context[0].created_at).partition(" ")[0] if state.context else ""
    since = f" · since {day}" if day else ""
    console.print(f"Session {key.session_id!r} of user {show_user(key.user_id)}{since}",
                  style="bold", markup=False, soft_wrap=True)
    table = Table(caption=caption, caption_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("time", style="dim")
    table.add_column("role", style="bold")
    table.add_column("content", overflow="fold")
    table.add_column("reason")
    for i, msg in enumerate(state.context):
        reason = msg.generate_reason.value if msg.generate_reason is not None else ""
        date, _, clock = _local(msg.created_at).partition(" ")
        when, day = (clock if date == day else f"{date} {clock}"), date  # a new day: its date
        table.add_row(str(i + 1), when, msg.role.value, _content(msg), reason)
    console.print(table)


def _content(msg: Msg) -> Text:
    """One message's blocks, one paragraph each: text, thinking, tool calls and results."""
    from rich.text import Text

    out = Text()
    for block in msg.content:
        if out:
            out.append("\n")
        if isinstance(block, TextBlock):
            out.append(block.text)
        elif isinstance(block, ThinkingBlock):
            out.append(f"thinking: {block.thinking}", "dim italic")
        elif isinstance(block, ToolUseBlock):
            args = json.dumps(block.input, ensure_ascii=False)
            out.append(f"→ {block.name} {args}", "yellow")
            out.append(f"  ({block.id})", "dim")
        elif isinstance(block, ToolResultBlock):
            style = "green" if block.state.value == "SUCCESS" else "red"
            out.append(f"← {block.name} · {block.state.value}", style)
            out.append(f"  ({block.id})\n", "dim")
            out.append(clip(block.text))
        elif isinstance(block, HintBlock):
            out.append(f"hint: {block.hint}", "dim")
        elif isinstance(block, DataBlock):
            out.append(f"[data: {block.media_type}]", "dim")
        else:
            out.append(f"[{block.type} block]", "dim")
    return out
