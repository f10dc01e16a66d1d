"""session_store_from_url for every scheme, and clear errors for bad URLs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rx_agent.session import (
    InMemorySessionStore,
    RedisSessionStore,
    SqliteSessionStore,
    register_store_scheme,
    session_store_from_url,
)
from rx_agent.session._url import sqlite_url, sqlite_url_path


def test_memory() -> None:
    assert isinstance(session_store_from_url("memory://"), InMemorySessionStore)
    assert isinstance(session_store_from_url("MEMORY://"), InMemorySessionStore)


def test_sqlite_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = session_store_from_url("sqlite:///data/sessions.db")
    assert isinstance(store, SqliteSessionStore)
    assert store.path == tmp_path / "data" / "sessions.db"
    store.close()


def test_sqlite_absolute(tmp_path: Path) -> None:
    target = tmp_path / "abs dir" / "s.db"
    store = session_store_from_url(f"sqlite:///{target.as_posix().replace(' ', '%20')}")
    assert isinstance(store, SqliteSessionStore) and store.path == target
    store.close()
    assert target.exists()


def test_redis_with_and_without_a_prefix(redis_url: str) -> None:
    store = session_store_from_url(redis_url)
    assert isinstance(store, RedisSessionStore)
    assert (store.url, store.prefix) == (redis_url, "rx_agent")
    named = session_store_from_url(f"{redis_url}?prefix=myapp&socket_timeout=5")
    assert isinstance(named, RedisSessionStore)
    assert named.prefix == "myapp" and named.url == f"{redis_url}?socket_timeout=5"
    assert named.list_sessions() == []  # the remaining options reach redis-py
    named.close()
    assert isinstance(session_store_from_url("rediss://localhost:6380/0"), RedisSessionStore)


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://db/x", "unknown session store URL scheme 'mysql'"),
    ("sessions.db", "not a session store URL: 'sessions.db' \\(a file\\? write sqlite:///"),
    ("", "not a session store URL"),
    ("memory://x", "memory:// takes nothing after it"),
    ("sqlite://host/x.db", "sqlite URLs have no host"),
    ("sqlite:///", "no database file"),
    ("sqlite:////tmp/dir/", "no database file"),
    ("sqlite:///x.db?mode=ro", "no query"),
    ("sqlite:///:memory:", "use memory://"),
    ("mysql://root:hunter2@db/x", "'mysql://root:\\*\\*\\*@db/x'"),
])
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        session_store_from_url(url)
    assert "hunter2" not in str(info.value)


def test_not_a_string() -> None:
    with pytest.raises(TypeError, match="is a str"):
        session_store_from_url(Path("x.db"))  # type: ignore[arg-type]


# -- suggestions that parse --------------------------------------------------------------

_SUGGESTED = re.compile(r"(?:memory|sqlite|rediss?)://[^\s,;)]*")

SUGGESTIONS = {
    "sqlite:/x.db": ["sqlite:///x.db", "sqlite:////x.db"],
    "SQLite:/data/x.db": ["sqlite:///data/x.db", "sqlite:////data/x.db"],
    "sqlite:x.db": ["sqlite:///x.db"],
    "sqlite://x.db": ["sqlite:///x.db", "sqlite:////x.db"],
    "sqlite://dir/x.db": ["sqlite:///dir/x.db", "sqlite:////dir/x.db"],
    "memory:": ["memory://"],
    "redis:localhost:6379/0": ["redis://localhost:6379/0"],
    "redis:/localhost/1": ["redis://localhost/1"],
    "sessions.db": ["sqlite:///sessions.db"],
    "my sessions.sqlite": ["sqlite:///my%20sessions.sqlite"],
    "/var/lib/app/s.db": ["sqlite:////var/lib/app/s.db"],
}


@pytest.mark.parametrize("url", list(SUGGESTIONS))
def test_a_near_miss_gets_suggestions_that_parse(url: str) -> None:
    with pytest.raises(ValueError) as info:
        session_store_from_url(url)
    # The suggestions: what the message offers before its list of forms, not the URL.
    offered = str(info.value).partition("; use ")[0].replace(repr(url), "")
    suggested = _SUGGESTED.findall(offered)
    assert suggested == SUGGESTIONS[url], str(info.value)
    for suggestion in suggested:
        if suggestion.startswith("sqlite"):
            # What it would open, without creating files outside tmp_path.
            assert sqlite_url_path(suggestion) is not None
        elif suggestion.startswith("redis"):
            pytest.importorskip("redis", reason="pip install -e '.[redis]'")
            assert isinstance(session_store_from_url(suggestion), RedisSessionStore)
        else:
            assert isinstance(session_store_from_url(suggestion), InMemorySessionStore)


def test_the_suggestions_name_the_files_they_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as info:
        session_store_from_url("sqlite:/x.db")
    assert ("(write sqlite:///x.db for x.db in the working directory, or sqlite:////x.db "
            "for /x.db)") in str(info.value)
    (relative, _absolute) = _SUGGESTED.findall(str(info.value))[:2]
    store = session_store_from_url(relative)
    assert isinstance(store, SqliteSessionStore) and store.path == tmp_path / "x.db"
    store.close()
    assert sqlite_url_path("sqlite:////x.db") == "/x.db"
    assert sqlite_url("my dir/a#b.db") == "sqlite:///my%20dir/a%23b.db"
    assert sqlite_url_path(sqlite_url("my dir/a#b.db")) == "my dir/a#b.db"


# -- Redis database numbers ----------------------------------------------------------------


@pytest.mark.parametrize("url", ["redis://host/abc", "redis://host/0/x", "rediss://h:6380/db1",
                                 "redis://host/-1", "redis://host/1a"])
def test_a_redis_path_that_is_not_a_database_number_is_refused(url: str) -> None:
    pytest.importorskip("redis", reason="pip install -e '.[redis]'")
    with pytest.raises(ValueError, match="the path is the database number"):
        session_store_from_url(url)
    with pytest.raises(ValueError, match="the path is the database number"):
        RedisSessionStore(url)  # the store itself, not only the URL parser


@pytest.mark.parametrize("url", ["redis://host", "redis://host/", "redis://host/3",
                                 "redis://host/3/", "rediss://u:pw@host:6380/15?prefix=p"])
def test_a_redis_database_number_is_accepted(url: str) -> None:
    pytest.importorskip("redis", reason="pip install -e '.[redis]'")
    assert isinstance(session_store_from_url(url), RedisSessionStore)


# -- registered schemes ------------------------------------------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The scheme registry, restored after the test."""
    from rx_agent.session import _url

    monkeypatch.setattr(_url, "_registry", dict(_url._registry))
    monkeypatch.setattr(_url, "_order", list(_url._order))
    return _url


def test_a_registered_scheme_opens_through_the_url(registry: Any) -> None:
    opened: list[str] = []

    def factory(url: str) -> InMemorySessionStore:
        opened.append(url)
        return InMemorySessionStore()

    register_store_scheme(("mem2", "mem3"), factory, forms=("mem2://NAME",))
    assert isinstance(session_store_from_url("MEM2://a?x=1"), InMemorySessionStore)
    assert isinstance(session_store_from_url("mem3://b"), InMemorySessionStore)
    assert opened == ["MEM2://a?x=1", "mem3://b"]
    with pytest.raises(ValueError, match=r"use memory://, .* or mem2://NAME$"):
        session_store_from_url("nope://x")
    with pytest.raises(ValueError, match=r"\(write mem3://b\)"):
        session_store_from_url("mem3:b")


def test_registering_is_checked(registry: Any) -> None:
    with pytest.raises(ValueError, match=r"'sqlite':// is registered already.*replace=True"):
        register_store_scheme("sqlite", lambda url: InMemorySessionStore())
    register_store_scheme("sqlite", lambda url: InMemorySessionStore(), replace=True)
    assert isinstance(session_store_from_url("sqlite:///x.db"), InMemorySessionStore)
    for bad in ("Redis", "pg://", "", "1db", "a b"):
        with pytest.raises(ValueError, match="a URL scheme is lowercase letters"):
            register_store_scheme(bad, lambda url: InMemorySessionStore())
    with pytest.raises(ValueError, match="at least one scheme"):
        register_store_scheme((), lambda url: InMemorySessionStore())
    with pytest.raises(TypeError, match="factory must be callable"):
        register_store_scheme("x", "not callable")  # type: ignore[arg-type]
    register_store_scheme("plain", lambda url: {"not": "a store"})  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="registered for plain:// returned dict, not a session"):
        session_store_from_url("plain://x")


def test_an_entry_point_registers_its_scheme_on_first_use(
    registry: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from importlib import metadata

    (tmp_path / "rx_plugin_store.py").write_text(
        "from rx_agent.session import InMemorySessionStore, register_store_scheme\n"
        "register_store_scheme('plugged', lambda url: InMemorySessionStore(),\n"
        "                      forms=('plugged://',))\n")
    (tmp_path / "rx_broken_plugin.py").write_text("raise RuntimeError('no driver')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [metadata.EntryPoint("plugged", "rx_plugin_store", registry.ENTRY_POINTS)]

    def entry_points(group: str) -> list[Any]:
        assert group == "rx_agent.session_stores"
        return points

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    assert "plugged" not in registry.store_url_forms(plugins=False)  # --help: no scan
    assert isinstance(session_store_from_url("plugged://"), InMemorySessionStore)
    assert registry.store_url_forms().endswith("or plugged://")
    points[:] = [metadata.EntryPoint("broken", "rx_broken_plugin", registry.ENTRY_POINTS)]
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    with pytest.raises(ImportError, match="plugin 'broken' \\(rx_broken_plugin\\) failed to "
                                          "load: no driver"):
        session_store_from_url("other://x")
