"""SqliteLongTermMemory on real files: per-user facts, search, deletion, isolation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rx_agent import LongTermMemory, MemoryFact, SqliteLongTermMemory, SqliteSessionStore
from rx_agent.builtin.memory import parse_facts


async def test_add_dedupes_search_recent_and_delete(tmp_path: Path) -> None:
    mem = SqliteLongTermMemory(tmp_path / "mem" / "facts.db")
    assert isinstance(mem, LongTermMemory)
    name = await mem.add("ada", "The user's name is Ada.", {"via": "tool"})
    assert isinstance(name, MemoryFact) and name.id.startswith("m") and name.user_id == "ada"
    again = await mem.add("ada", "  the user's NAME is   ada ")
    assert again.id == name.id and again.text == "The user's name is Ada."
    tea = await mem.add("ada", "The user drinks green tea every morning.")
    await mem.add("ada", "The user lives in Lisbon.")
    assert await mem.count("ada") == 3

    found = await mem.search("ada", "what tea should I drink?", 2)
    assert found[0].id == tea.id and found[0].score is not None
    assert [f.id for f in await mem.recent("ada", 2)][1] == tea.id
    assert (await mem.recent("ada", 10))[-1].metadata == {"via": "tool"}

    assert await mem.delete("ada", tea.id) is True
    assert await mem.delete("ada", tea.id) is False
    assert await mem.search("ada", "green tea", 5) == []
    assert await mem.clear("ada") == 2
    assert await mem.count("ada") == 0
    mem.close()


async def test_users_never_see_each_others_facts(tmp_path: Path) -> None:
    mem = SqliteLongTermMemory(tmp_path / "m.db")
    secret = await mem.add("bob", "The user's locker code is 4711.")
    await mem.add("ada", "The user's favourite number is 7.")
    assert await mem.search("ada", "locker code 4711", 5) == []
    assert all(f.user_id == "ada" for f in await mem.recent("ada", 50))
    assert await mem.delete("ada", secret.id) is False  # not hers to delete
    assert await mem.clear("ada") == 1
    assert [f.id for f in await mem.search("bob", "locker", 5)] == [secret.id]
    # The same text is two facts for two users.
    twin = await mem.add("ada", "The user's locker code is 4711.")
    assert twin.id != secret.id
    mem.close()


async def test_facts_persist_and_share_a_file_with_sessions(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    sessions = SqliteSessionStore(path)
    mem = SqliteLongTermMemory(path)
    fact = await mem.add("ada", "The user prefers metric units.")
    mem.close()
    again = SqliteLongTermMemory(path)
    assert [f.id for f in await again.recent("ada")] == [fact.id]
    assert sessions.list_sessions() == []  # the session tables are intact
    again.close()
    sessions.close()


async def test_concurrent_writers(tmp_path: Path) -> None:
    a = SqliteLongTermMemory(tmp_path / "m.db")
    b = SqliteLongTermMemory(tmp_path / "m.db")
    await asyncio.gather(*(
        (a if i % 2 else b).add(f"u{i % 3}", f"Fact number {i} about the user.")
        for i in range(30)
    ))
    counts = [await a.count(f"u{u}") for u in range(3)]
    assert counts == [10, 10, 10]
    a.close()
    b.close()


async def test_bad_input(tmp_path: Path) -> None:
    mem = SqliteLongTermMemory(tmp_path / "m.db")
    with pytest.raises(ValueError, match="non-empty user id"):
        await mem.add("", "x")
    with pytest.raises(ValueError, match="non-blank"):
        await mem.add("ada", "   ")
    with pytest.raises(ValueError, match="at most 2000 characters"):
        await mem.add("ada", "word " * 1000)
    with pytest.raises(ValueError, match="limit must be"):
        await mem.recent("ada", 0)
    assert await mem.search("ada", "?!", 3) == []
    with pytest.raises(ValueError, match="needs a file path"):
        SqliteLongTermMemory(":memory:")
    mem.close()


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ('{"facts": ["The user is vegan.", " "]}', ["The user is vegan."]),
        ('```json\n{"facts": ["A", "B"]}\n```', ["A", "B"]),
        ('Here you go: ["A"] and more', ["A"]),
        ('{"facts": []}', []),
    ],
)
def test_parse_facts(answer: str, facts: list[str]) -> None:
    assert parse_facts(answer) == facts


@pytest.mark.parametrize(
    ("answer", "message"),
    [("nothing to add", "no JSON"), ('{"facts": "A"}', "must be"),
     ('{"facts": [1]}', "must be"), ("{broken", "not valid JSON")],
)
def test_parse_facts_refuses(answer: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_facts(answer)
