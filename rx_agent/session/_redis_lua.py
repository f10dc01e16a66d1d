"""The Lua scripts of :class:`~rx_agent.session.RedisSessionStore`.

Each store operation is one script, so it is atomic on the server and costs one
round trip. Lease expiry and waiter deadlines use the server's clock (``TIME``),
never a client's; this needs Redis 5 or newer (scripts replicated as effects).
"""

from __future__ import annotations

__all__ = ["SCRIPTS"]

# KEYS: head, msgs -> {{version, head, count}, {bodies...}}
LOAD = """
return {redis.call('HMGET', KEYS[1], 'version', 'head', 'count'),
        redis.call('LRANGE', KEYS[2], 0, -1)}
"""

# KEYS: head, msgs, users, user's sessions
# ARGV: expected (-1: any), base version (-2: rewrite all), base count, start,
#       head, count, user_id, session_id, updated_at, bodies...
# -> {1, new version} | {0, actual version} (conflict) | {-1, actual} (base is stale)
#    | {-3, 0} (the stored version is not a number)
SAVE = """
local actual = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if actual == nil or actual ~= math.floor(actual) then return {-3, 0} end
local expected = tonumber(ARGV[1])
if expected >= 0 and actual ~= expected then return {0, actual} end
local len = redis.call('LLEN', KEYS[2])
local start = tonumber(ARGV[4])
if ARGV[2] ~= '-2' and (actual ~= tonumber(ARGV[2]) or len ~= tonumber(ARGV[3])) then
  return {-1, actual}
end
if start == 0 then
  redis.call('DEL', KEYS[2])
elseif start < len then
  redis.call('LTRIM', KEYS[2], 0, start - 1)
end
local i = 10
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local version = actual + 1
redis.call('HSET', KEYS[1], 'version', version, 'head', ARGV[5], 'count', ARGV[6],
           'updated', ARGV[9])
redis.call('SADD', KEYS[3], ARGV[7])
redis.call('SADD', KEYS[4], ARGV[8])
return {1, version}
"""

# KEYS: head, msgs, users, user's sessions; ARGV: user_id, session_id -> 1 | 0
DELETE = """
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[4], ARGV[2])
if redis.call('SCARD', KEYS[4]) == 0 then redis.call('SREM', KEYS[3], ARGV[1]) end
return existed
"""

# KEYS: lease, queue (zset token -> arrival ms), waiters (hash token -> deadline ms)
# ARGV: value ("token owner"), ttl ms, token, join (1/0), waiter ttl ms
# -> {1, '', 0} acquired | {0, holder value or '', holder's ms left or -2}
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local deadline = tonumber(redis.call('HGET', KEYS[3], w) or '0')
  if deadline < now then
    redis.call('ZREM', KEYS[2], w)
    redis.call('HDEL', KEYS[3], w)
  end
end
local holder = redis.call('GET', KEYS[1])
if not holder then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #first == 0 or first[1] == ARGV[3] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    redis.call('ZREM', KEYS[2], ARGV[3])
    redis.call('HDEL', KEYS[3], ARGV[3])
    return {1, '', 0}
  end
end
if ARGV[4] == '1' then
  if not redis.call('ZSCORE', KEYS[2], ARGV[3]) then redis.call('ZADD', KEYS[2], now, ARGV[3]) end
  redis.call('HSET', KEYS[3], ARGV[3], now + tonumber(ARGV[5]))
  redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[5]))
  redis.call('PEXPIRE', KEYS[3], 2 * tonumber(ARGV[5]))
end
return {0, holder or '', redis.call('PTTL', KEYS[1])}
"""

# KEYS: queue, waiters; ARGV: token
LEAVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""

# KEYS: lease; ARGV: value, ttl ms -> 1 renewed | 0 lost
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS: lease; ARGV: value -> 1 released | 0 not held by this lease (nothing changed)
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

SCRIPTS = {"load": LOAD, "save": SAVE, "delete": DELETE, "acquire": ACQUIRE, "leave": LEAVE,
           "renew": RENEW, "release": RELEASE}
