"""The Redis run journal: one stream per session, on the store's asyncio clients.

Keys (beside the store's, same prefix and escaping)::

    {prefix}:journal:{user}:{session}         stream: one entry per append (a batch)
    {prefix}:journal:{user}:{session}:head    string: the last seq given out
    {prefix}:journal:{user}:{session}:runs    hash run id -> the seq of its first entry

A stream entry holds one append's events (fields ``r`` run id, ``at`` time, ``b`` the
batch as JSON) and its id is ``<last seq>-0``, so ``XRANGE`` / ``XREAD`` from a seq find
the batch that holds it. An append is one Lua script (atomic, one round trip):
``INCRBY`` on the head gives the entries consecutive seqs, one ``XADD`` writes them,
and ``XTRIM MINID`` drops the batches wholly older than the newest ``max_events``
entries (a batch that straddles the line stays whole) or than ``max_age`` (the stream
and the runs hash also expire ``max_age`` after the last append; the head stays, so
seqs never restart). A live reader blocks in ``XREAD BLOCK`` and wakes on the server
as soon as any process appends. Needs Redis 6.2 or newer (``XTRIM MINID``).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from typing import Any

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal, decode_batch, encode_batch
from ._journal_writer import Item

__all__ = ["RedisRunJournal"]

# KEYS: stream, head, runs. ARGV: max_events, max_age ms (-1: none), now ms, run id,
# entries in the batch, the batch's JSON, its last entry's time. -> the last seq.
APPEND = """
local n = tonumber(ARGV[5])
local last = redis.call('INCRBY', KEYS[2], n)
redis.call('HSETNX', KEYS[3], ARGV[4], last - n + 1)
redis.call('XADD', KEYS[1], last .. '-0', 'r', ARGV[4], 'at', ARGV[7], 'b', ARGV[6])
local floor = last - tonumber(ARGV[1])
if floor > 0 then redis.call('XTRIM', KEYS[1], 'MINID', (floor + 1) .. '-0') end
local age = tonumber(ARGV[2])
if age >= 0 then
  local cutoff = (tonumber(ARGV[3]) - age) / 1000
  for _ = 1, 20 do
    local batch = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 100)
    if #batch == 0 then break end
    local keep = nil
    for _, e in ipairs(batch) do
      if tonumber(e[2][4]) >= cutoff then keep = e[1] break end
    end
    if keep then
      redis.call('XTRIM', KEYS[1], 'MINID', keep)
      break
    end
    local id = batch[#batch][1]
    local dash = string.find(id, '-')
    redis.call('XTRIM', KEYS[1], 'MINID', (tonumber(string.sub(id, 1, dash - 1)) + 1) .. '-0')
  end
  redis.call('PEXPIRE', KEYS[1], age)
  redis.call('PEXPIRE', KEYS[3], age)
end
if redis.call('HLEN', KEYS[3]) > tonumber(ARGV[1]) then
  local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
  if oldest then
    local dash = string.find(oldest[1], '-')
    local min = tonumber(string.sub(oldest[1], 1, dash - 1)) - tonumber(ARGV[1])
    local all = redis.call('HGETALL', KEYS[3])
    for i = 1, #all, 2 do
      if tonumber(all[i + 1]) < min then redis.call('HDEL', KEYS[3], all[i]) end
    end
  end
end
return last
"""


def _esc(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _seq(entry_id: bytes | str) -> int:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.partition("-")[0])


def _entries(rows: Any, after: int) -> list[JournalEntry]:
    """The entries after seq ``after`` in stream entries ``(id, fields)``."""
    out: list[JournalEntry] = []
    for entry_id, fields in rows or []:
        batch = decode_batch(_seq(entry_id), fields[b"r"].decode(), fields[b"b"])
        out.extend(batch if batch[0].seq > after else [e for e in batch if e.seq > after])
    return out


class RedisRunJournal(RunJournal):
    """The journal of a ``RedisSessionStore`` (``store.journal()``)."""

    block: float = 2.5
    """The longest ``XREAD BLOCK`` (seconds): half the ``socket_timeout`` (redis-py 8
    defaults it to 5 s even when no option sets it: a longer block times out)."""

    def __init__(self, prefix: str, client: Callable[[], Any],
                 socket_timeout: object = None) -> None:
        """``client()``: the store's asyncio client for the running loop."""
        super().__init__()
        self._prefix = prefix
        self._aclient = client
        if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
            self.block = min(self.block, socket_timeout / 2)
        self._scripts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def _keys(self, key: SessionKey) -> list[str]:
        stream = f"{self._prefix}:journal:{_esc(key.user_id)}:{_esc(key.session_id)}"
        return [stream, f"{stream}:head", f"{stream}:runs"]

    def _client(self) -> tuple[Any, Any]:
        client = self._aclient()
        script = self._scripts.get(client)
        if script is None:
            script = self._scripts[client] = client.register_script(APPEND)
        return client, script

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        _, script = self._client()
        age = -1 if math.isinf(self.max_age) else max(1, round(self.max_age * 1000))
        args = [self.max_events, age, round(time.time() * 1000), run_id, len(items),
                encode_batch(items), repr(items[-1][3])]
        return int(await script(keys=self._keys(key), args=args))

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        client, _ = self._client()
        stream, head, _runs = self._keys(key)
        async with client.pipeline(transaction=True) as pipe:  # one snapshot
            pipe.execute_command("XRANGE", stream, f"{after + 1}-0", "+", "COUNT", limit)
            pipe.execute_command("GET", head)
            rows, last = await pipe.execute()
        return _entries(rows, after)[:limit], int(last or 0)

    async def _read_wait(self, key: SessionKey, after: int, limit: int,
                         timeout: float) -> list[JournalEntry]:
        client, _ = self._client()
        block = max(1, round(min(timeout, self.block) * 1000))
        answer = await client.execute_command("XREAD", "COUNT", limit, "BLOCK", block,
                                              "STREAMS", self._keys(key)[0], f"{after}-0")
        if not answer:
            return []
        rows = next(iter(answer.values())) if isinstance(answer, dict) else answer[0][1]
        return _entries(rows, after)[:limit]

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        client, _ = self._client()
        stream, _head, runs = self._keys(key)
        first = await client.execute_command("HGET", runs, run_id)
        if first is None:
            return None
        guess = int(first) + index  # where it is when the run was not interleaved
        rows = await client.execute_command("XRANGE", stream, f"{guess}-0", "+", "COUNT", 1)
        for entry in _entries(rows, guess - 1):
            if entry.seq == guess and entry.run_id == run_id and entry.index == index:
                return entry.seq
        start = int(first)
        for _ in range(50):  # interleaved with another run: scan from its first entry
            rows = await client.execute_command("XRANGE", stream, f"{start}-0", "+",
                                                "COUNT", 100)
            for entry in _entries(rows, start - 1):
                if entry.run_id == run_id:
                    if entry.index == index:
                        return entry.seq
                    if entry.index > index:
                        return None
            if not rows or len(rows) < 100:
                return None
            start = _seq(rows[-1][0]) + 1
        return None
