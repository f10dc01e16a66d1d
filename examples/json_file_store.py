"""A session backend in one file: each session a JSON file in a folder.

Built on ``SessionBackend``: it implements five primitives (read, compare-and-set
write, delete, list, and a read-modify-write of one lease record) and gets the whole
store API from the kit: sync and ``a``-prefixed methods, leases with a first come,
first served queue, conflict policies. A lock file makes every step atomic across the
processes of one host (POSIX ``flock``). ``tests/session/test_contract.py`` runs
``rx_agent.testing.store_contract`` on it, the suite the built-in stores pass.

    python examples/json_file_store.py
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from rx_agent import AgentState, ReActAgent, RuntimeContext, ScriptedModel
from rx_agent.session import (
    ConcurrentSessionModificationError,
    LeaseRecord,
    SessionBackend,
    SessionCorruptError,
    SessionKey,
    decode_state,
    encode_state,
    register_store_scheme,
    session_store_from_url,
)

T = TypeVar("T")


# --8<-- [start:backend]
class JsonFileSessionStore(SessionBackend):
    """Sessions as ``<folder>/sessions/<user>+<session>.json``: the version on the first
    line, the state (schema-2 JSON) on the second."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).absolute()
        for part in ("sessions", "leases"):
            (self.folder / part).mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"JsonFileSessionStore({str(self.folder)!r})"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            yield

    def _path(self, part: str, key: SessionKey) -> Path:
        name = f"{quote(key.user_id, safe='')}+{quote(key.session_id, safe='')}.json"
        return self.folder / part / name  # quote() escapes '+', so names never collide

    def _replace(self, path: Path, text: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)  # readers see the old file or the new one, never half

    def _stored(self, key: SessionKey) -> tuple[int, str]:
        try:
            text = self._path("sessions", key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0, ""
        version, _, body = text.partition("\n")
        if not version.isdigit():
            raise SessionCorruptError(key.session_id, "the first line is not a version",
                                      user_id=key.user_id, where=repr(self))
        return int(version), body

    # The primitives. Each runs as is under the sync API and on a worker thread under
    # the async one (SessionBackend._run_blocking), so the event loop never waits.

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        version, body = self._stored(key)
        return (decode_state(body, key) if version else None), version

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        text = encode_state(state)  # the whole state: ``marked`` needs no attention
        with self._locked():
            actual = self._stored(key)[0]
            if expected is not None and actual != expected:
                raise ConcurrentSessionModificationError(key.session_id, expected, actual,
                                                         user_id=key.user_id)
            self._replace(self._path("sessions", key), f"{actual + 1}\n{text}")
        return actual + 1

    def _remove(self, key: SessionKey) -> bool:
        with self._locked():
            try:
                self._path("sessions", key).unlink()
            except FileNotFoundError:
                return False
        return True

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        keys = []
        for path in (self.folder / "sessions").glob("*+*.json"):
            user, _, session = path.name.removesuffix(".json").partition("+")
            keys.append(SessionKey(unquote(user), unquote(session)))
        return sorted(k for k in keys if user_id is None or k.user_id == user_id)

    def _update_lease(self, key: SessionKey,
                      change: Callable[[LeaseRecord | None], tuple[LeaseRecord | None, T]]) -> T:
        path = self._path("leases", key)
        with self._locked():
            record = LeaseRecord.from_json(json.loads(path.read_text())) if path.exists() else None
            new, answer = change(record)
            if new is None:
                path.unlink(missing_ok=True)
            else:
                self._replace(path, json.dumps(new.to_json()))
        return answer


def open_json_store(url: str) -> JsonFileSessionStore:
    """``jsonfile:///abs/folder`` or ``jsonfile://./relative/folder``."""
    folder = unquote(url.partition("://")[2])
    if not folder:
        raise ValueError(f"no folder in {url!r}: write jsonfile:///path/to/folder")
    return JsonFileSessionStore(folder)


register_store_scheme("jsonfile", open_json_store, forms=("jsonfile:///path/to/folder",),
                      local_path=lambda url: unquote(url.partition("://")[2]), replace=True)
# --8<-- [end:backend]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # --8<-- [start:use]
        store = session_store_from_url(f"jsonfile://{tmp}/sessions")
        model = ScriptedModel(["Hello, Ada.", "You are Ada."])
        ReActAgent(name="a", model=model, session_store=store).call_sync(
            "I am Ada.", RuntimeContext(session_id="s1", user_id="ada"))
        # Another agent and store object, as another process would have: the same session.
        again = ReActAgent(name="a", model=model,
                           session_store=JsonFileSessionStore(f"{tmp}/sessions"))
        reply = again.call_sync("Who am I?", RuntimeContext(session_id="s1", user_id="ada"))
        print(reply.text, store.list_sessions(), store.load_versioned(SessionKey("ada", "s1"))[1])
        # --8<-- [end:use]
        files: Any = sorted(p.name for p in Path(tmp, "sessions", "sessions").iterdir())
        print(files)


if __name__ == "__main__":
    main()
