"""Where a SQLite file may be created: its own missing folder, never a deeper gap.

The rule of ``session/_sqlite_file.py``, shared by the session store, the knowledge base
and long-term memory: a typo in a parent directory (``/srv/dta/app/x.db``) is refused
with the highest missing directory named, instead of silently creating the whole tree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rx_agent import SqliteKnowledge, SqliteLongTermMemory, SqliteSessionStore
from rx_agent.session import session_store_from_url
from rx_agent.session._sqlite_file import MissingDirectoryError

OPENERS: dict[str, Callable[[Path], Any]] = {
    "SqliteSessionStore": SqliteSessionStore,
    "SqliteKnowledge": SqliteKnowledge,
    "SqliteLongTermMemory": SqliteLongTermMemory,
    "session_store_from_url": lambda path: session_store_from_url(f"sqlite:///{path}"),
}


@pytest.fixture(params=list(OPENERS))
def open_db(request: pytest.FixtureRequest) -> Callable[[Path], Any]:
    return OPENERS[request.param]


def test_the_files_own_missing_folder_is_created(
    tmp_path: Path, open_db: Callable[[Path], Any]
) -> None:
    db = open_db(tmp_path / "data" / "x.db")
    db.close()
    assert (tmp_path / "data" / "x.db").is_file()


def test_a_deeper_missing_directory_is_refused_and_named(
    tmp_path: Path, open_db: Callable[[Path], Any]
) -> None:
    target = tmp_path / "nonexistent-dir" / "x" / "y.db"
    with pytest.raises(MissingDirectoryError) as info:
        open_db(target)
    message = str(info.value)
    assert f"cannot create {target}: the directory {tmp_path / 'nonexistent-dir'} does not " \
           "exist" in message
    assert f"mkdir -p {target.parent}" in message
    assert not (tmp_path / "nonexistent-dir").exists()  # nothing was created
    # What open() would raise, and a bad path like any other the stores refuse.
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, ValueError)


def test_a_folder_that_is_a_file_is_refused(
    tmp_path: Path, open_db: Callable[[Path], Any]
) -> None:
    (tmp_path / "plain").write_text("not a directory")
    with pytest.raises(MissingDirectoryError, match="plain is not a directory"):
        open_db(tmp_path / "plain" / "x.db")
    with pytest.raises(MissingDirectoryError, match="plain is not a directory"):
        open_db(tmp_path / "plain" / "sub" / "x.db")


def test_an_existing_tree_is_fine(tmp_path: Path, open_db: Callable[[Path], Any]) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    open_db(tmp_path / "a" / "b" / "x.db").close()
    assert (tmp_path / "a" / "b" / "x.db").is_file()
