import { createHash } from 'node:crypto';

/** A Lua script with its SHA1, for EVALSHA with an EVAL fallback. */
export interface RedisScript {
  readonly source: string;
  readonly sha: string;
}

/** A script with its SHA1 (also for the Redlock backend's own scripts). */
export function script(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

// Keys and tokens reach the scripts only as KEYS/ARGV, never spliced into the text, so no key
// content can change what runs.

/**
 * Shared prelude of the queue scripts (KEYS: lock, fence, queue, waiter expiries). Defines
 * `serverNow()` (the server's clock, so no client clock matters), `firstInLine()` (the first
 * live waiter after dropping those that stopped refreshing their place, or nil; costs one
 * EXISTS when nobody queues, the uncontended case) and `handOver(member)`: gives the free lock
 * to that waiter ("<channel> <lease ms> <token>") for its hand-over lease, bumps the fence and
 * publishes "<token> <fence>" on the waiter's channel. The waiter holds the lock before it even
 * hears of it, so a hand-off costs one message instead of a wake-up plus a round trip.
 */
const QUEUE_PRELUDE = `
if redis.replicate_commands then redis.replicate_commands() end
local function serverNow()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function firstInLine()
  if redis.call('exists', KEYS[3]) == 0 then return nil end
  local now = serverNow()
  local dropped = redis.call('zrangebyscore', KEYS[4], '-inf', now)
  if #dropped > 0 then
    redis.call('zrem', KEYS[3], unpack(dropped))
    redis.call('zremrangebyscore', KEYS[4], '-inf', now)
  end
  return redis.call('zrange', KEYS[3], 0, 0)[1]
end
local function handOver(member)
  local channel, lease, token = string.match(member, '^(%S+) (%d+) (%S+)$')
  redis.call('set', KEYS[1], token, 'PX', lease)
  redis.call('zrem', KEYS[3], member)
  redis.call('zrem', KEYS[4], member)
  local fence = redis.call('incr', KEYS[2])
  -- pcall: an ACL user without channel rights still hands over; the waiter polls instead.
  redis.pcall('publish', channel, token .. ' ' .. fence)
end
`;

/**
 * KEYS: lock, fence, queue, waiter expiries, arrival counter · ARGV: token, ttl ms, waiter ttl
 * ms (0 = one attempt, do not queue), queue member ("<channel> <lease ms> <token>").
 *
 * `{1, fence}`: taken now (free, and nobody queued or the caller is first in line), the fence
 * bumped in the same atomic step. `{2, fence}`: a release already handed it to the caller.
 * Otherwise `{0, ms}`: how long until it is worth asking again (the holder's remaining lease).
 * With a waiter ttl, the caller joins the FIFO queue (or refreshes its place, which lapses
 * after the waiter ttl without a refresh). A free lock found with someone else first in line
 * (its holder's lease ran out) is handed to them.
 */
export const ACQUIRE = script(`${QUEUE_PRELUDE}
local current = redis.call('get', KEYS[1])
if current == ARGV[1] then return {2, tonumber(redis.call('get', KEYS[2]))} end
if not current then
  local head = firstInLine()
  if not head or head == ARGV[4] then
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    if head then
      redis.call('zrem', KEYS[3], head)
      redis.call('zrem', KEYS[4], head)
    end
    return {1, redis.call('incr', KEYS[2])}
  end
  handOver(head)
end
local waiterTtl = tonumber(ARGV[3])
if waiterTtl > 0 then
  if not redis.call('zscore', KEYS[3], ARGV[4]) then
    redis.call('zadd', KEYS[3], redis.call('incr', KEYS[5]), ARGV[4])
  end
  redis.call('zadd', KEYS[4], serverNow() + waiterTtl, ARGV[4])
  for i = 3, 5 do redis.call('pexpire', KEYS[i], 2 * waiterTtl) end
end
return {0, redis.call('pttl', KEYS[1])}
`);

/** KEYS: lock · ARGV: token, ttl ms. Renews only our own lock: 1, else 0. */
export const EXTEND = script(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
`);

/**
 * KEYS: lock, fence, queue, waiter expiries · ARGV: token. Deletes only our own lock and hands
 * it to the first in line, if any: 1, else 0 (expired, or someone else's).
 */
export const RELEASE = script(`${QUEUE_PRELUDE}
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
local head = firstInLine()
if head then handOver(head) end
return 1
`);

/**
 * KEYS: lock, fence, queue, waiter expiries · ARGV: queue member, token. A waiter that gives
 * up leaves the queue; a lock handed to it meanwhile goes on to the next in line.
 */
export const LEAVE_QUEUE = script(`${QUEUE_PRELUDE}
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if redis.call('get', KEYS[1]) == ARGV[2] then redis.call('del', KEYS[1]) end
if redis.call('exists', KEYS[1]) == 0 then
  local head = firstInLine()
  if head then handOver(head) end
end
return 1
`);

/**
 * KEYS: lock, fence, queue, waiter expiries · ARGV: none. What `LockService.inspect` reports:
 * `{held (0|1), fence, lease left ms (PTTL), live waiters}`. The fence counter is bumped by every
 * grant and by nothing else, so it is the holder's fence while the key is held, else the last
 * one handed out (0: never granted). Waiters are counted by their places that have not lapsed.
 * Reads only.
 */
export const INSPECT = script(`
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {
  redis.call('exists', KEYS[1]),
  tonumber(redis.call('get', KEYS[2]) or '0'),
  redis.call('pttl', KEYS[1]),
  redis.call('zcount', KEYS[4], '(' .. now, '+inf')
}
`);

/**
 * KEYS: lock, fence, queue, waiter expiries · ARGV: none. Frees the lock whoever holds it and
 * hands it to the first in line, as a release would: 1, else 0 (it was free). The fence counter
 * is untouched, so the next grant's fence is higher than the removed holder's, and that holder's
 * next EXTEND finds the lock gone (or someone else's) and fails.
 */
export const FORCE_RELEASE = script(`${QUEUE_PRELUDE}
if redis.call('exists', KEYS[1]) == 0 then return 0 end
redis.call('del', KEYS[1])
local head = firstInLine()
if head then handOver(head) end
return 1
`);

/**
 * KEYS: fence · ARGV: value. Raises a node's fence counter to at least `value` (never lowers
 * it): Redlock's second fencing round, so the next grant's INCR on any quorum exceeds it.
 */
export const RAISE_FENCE = script(`
local current = tonumber(redis.call('get', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
return 1
`);
