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
 * Lua helpers on a lock value, `<token> <fence>` (tokens contain no space): `owns(value, token)`
 * compares the token part (a bare `<token>`, as Redlock's first round writes, matches too);
 * `fenceOf(value)` is the holder's fence, or nil when the value carries none.
 */
export const HOLDER_LUA = `
local function owns(value, token)
  return value and (value == token or string.sub(value, 1, #token + 1) == token .. ' ')
end
local function fenceOf(value)
  return value and tonumber(string.match(value, ' (%d+)$'))
end
`;

/**
 * Lua helpers on fence bucket counters (see `fence-buckets.ts`).
 * `checkBuckets(meta, want, init)`: refuses (error "FENCEBUCKETS <n>") to go on when the node's
 * counters are laid out for another bucket count (`meta` nil on a Cluster: one per slot, no
 * check); `init` records `want` on a node that has no count yet (fresh, or restarted empty).
 * `drawFence(counter, legacy)`: the next fence of the bucket, first raising the bucket to a
 * per-key counter left by an earlier version (and deleting it), so the key's fences keep rising
 * across the upgrade. `lastFence(counter, legacy)`: what the key's last grant got at most.
 */
export const FENCE_LUA = `
local function checkBuckets(meta, want, init)
  if not meta then return end
  local have = redis.call('get', meta)
  if not have then
    if init then redis.call('set', meta, want) end
  elseif have ~= want then
    error({err = 'FENCEBUCKETS ' .. have})
  end
end
local function drawFence(counter, legacy)
  local old = tonumber(redis.call('get', legacy) or '')
  if old then
    if tonumber(redis.call('get', counter) or '0') < old then redis.call('set', counter, old) end
    redis.call('del', legacy)
  end
  return redis.call('incr', counter)
end
local function lastFence(counter, legacy)
  local bucket = tonumber(redis.call('get', counter) or '0') or 0
  local old = tonumber(redis.call('get', legacy) or '0') or 0
  if old > bucket then return old end
  return bucket
end
`;

/**
 * Shared prelude of the queue scripts. KEYS: lock, fence bucket counter, queue, waiter
 * expiries, legacy per-key fence counter, arrival counter, and on a single node the bucket-count
 * key (absent on a Cluster) · last ARGV: the bucket count this instance uses. Defines
 * `serverNow()` (the server's clock, so no client clock matters), `firstInLine()` (the first
 * live waiter after dropping those that stopped refreshing their place, or nil; costs one
 * EXISTS when nobody queues, the uncontended case) and `handOver(member)`: gives the free lock
 * to that waiter ("<channel> <lease ms> <token>") for its hand-over lease with a fresh fence
 * and publishes "<token> <fence>" on the waiter's channel. The waiter holds the lock before it
 * even hears of it, so a hand-off costs one message instead of a wake-up plus a round trip.
 */
export const QUEUE_PRELUDE = `
if redis.replicate_commands then redis.replicate_commands() end
${HOLDER_LUA}
${FENCE_LUA}
local BUCKETS = ARGV[#ARGV]
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
  local fence = drawFence(KEYS[2], KEYS[5])
  redis.call('set', KEYS[1], token .. ' ' .. fence, 'PX', lease)
  redis.call('zrem', KEYS[3], member)
  redis.call('zrem', KEYS[4], member)
  -- pcall: an ACL user without channel rights still hands over; the waiter polls instead.
  redis.pcall('publish', channel, token .. ' ' .. fence)
end
`;

/**
 * KEYS: see the queue prelude · ARGV: token, ttl ms, waiter ttl ms (0 = one attempt, do not
 * queue), queue member ("<channel> <lease ms> <token>"), bucket count.
 *
 * `{1, fence}`: taken now (free, and nobody queued or the caller is first in line), with a
 * fence drawn from the key's bucket in the same atomic step and kept in the lock value.
 * `{2, fence}`: a release already handed it to the caller (the fence stored with the lock: the
 * bucket may have moved on for other keys). Otherwise `{0, ms}`: how long until it is worth
 * asking again (the holder's remaining lease). With a waiter ttl, the caller joins the FIFO
 * queue (or refreshes its place, which lapses after the waiter ttl without a refresh). A free
 * lock found with someone else first in line (its holder's lease ran out) is handed to them.
 */
export const ACQUIRE = script(`${QUEUE_PRELUDE}
checkBuckets(KEYS[7], BUCKETS, true)
local current = redis.call('get', KEYS[1])
if owns(current, ARGV[1]) then
  return {2, fenceOf(current) or lastFence(KEYS[2], KEYS[5])}
end
if not current then
  local head = firstInLine()
  if not head or head == ARGV[4] then
    local fence = drawFence(KEYS[2], KEYS[5])
    redis.call('set', KEYS[1], ARGV[1] .. ' ' .. fence, 'PX', ARGV[2])
    if head then
      redis.call('zrem', KEYS[3], head)
      redis.call('zrem', KEYS[4], head)
    end
    return {1, fence}
  end
  handOver(head)
end
local waiterTtl = tonumber(ARGV[3])
if waiterTtl > 0 then
  if not redis.call('zscore', KEYS[3], ARGV[4]) then
    redis.call('zadd', KEYS[3], redis.call('incr', KEYS[6]), ARGV[4])
  end
  redis.call('zadd', KEYS[4], serverNow() + waiterTtl, ARGV[4])
  for _, i in ipairs({3, 4, 6}) do redis.call('pexpire', KEYS[i], 2 * waiterTtl) end
end
return {0, redis.call('pttl', KEYS[1])}
`);

/** KEYS: lock · ARGV: token, ttl ms. Renews only our own lock: 1, else 0. */
export const EXTEND = script(`${HOLDER_LUA}
if owns(redis.call('get', KEYS[1]), ARGV[1]) then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
`);

/**
 * Most leases one renewal script renews: a batch of thousands is cut into calls of this many
 * (sent together in one pipeline), so no single script keeps the server busy for long.
 */
export const EXTEND_BATCH = 1_000;

/**
 * KEYS: n locks · ARGV: n tokens, then n ttls (ms), or one ttl for all. Renews each lock only if its own token
 * holds it: per key, in order, 1 (renewed), 0 (not ours), or the error its key got as a string
 * (a key of another type: that lease fails alone, not the whole batch). One call renews a whole
 * batch of leases (on a Cluster, those of one slot).
 */
export const EXTEND_MANY = script(`${HOLDER_LUA}
local n = #KEYS
local renewed = {}
-- One ttl for all (the common case: one ttl per service) or one per key.
local shared = #ARGV == n + 1
for i = 1, n do
  local current = redis.pcall('get', KEYS[i])
  if type(current) == 'table' and current.err then
    renewed[i] = current.err
  elseif owns(current, ARGV[i]) then
    renewed[i] = redis.call('pexpire', KEYS[i], shared and ARGV[n + 1] or ARGV[n + i])
  else
    renewed[i] = 0
  end
end
return renewed
`);

/**
 * A per-key answer of a batch script (`EXTEND_MANY`, Redlock's `RENEW_COPIES`): an error the
 * key got is returned as its message (a string) and raised here as the `ReplyError` a single
 * call would have rejected with.
 */
export function keyError(reply: unknown): Error | undefined {
  if (typeof reply !== 'string') return undefined;
  const err = new Error(reply);
  err.name = 'ReplyError';
  return err;
}

/**
 * KEYS/ARGV: see the queue prelude, ARGV: token, bucket count. Deletes only our own lock and
 * hands it to the first in line, if any: 1, else 0 (expired, or someone else's).
 */
export const RELEASE = script(`${QUEUE_PRELUDE}
checkBuckets(KEYS[7], BUCKETS, true)
if not owns(redis.call('get', KEYS[1]), ARGV[1]) then return 0 end
redis.call('del', KEYS[1])
local head = firstInLine()
if head then handOver(head) end
return 1
`);

/**
 * KEYS: see the queue prelude · ARGV: queue member, token, bucket count. A waiter that gives
 * up leaves the queue; a lock handed to it meanwhile goes on to the next in line.
 */
export const LEAVE_QUEUE = script(`${QUEUE_PRELUDE}
checkBuckets(KEYS[7], BUCKETS, true)
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if owns(redis.call('get', KEYS[1]), ARGV[2]) then redis.call('del', KEYS[1]) end
if redis.call('exists', KEYS[1]) == 0 then
  local head = firstInLine()
  if head then handOver(head) end
end
return 1
`);

/**
 * KEYS: see the queue prelude · ARGV: bucket count. What `LockService.inspect` reports:
 * `{held (0|1), fence, lease left ms (PTTL), live waiters}`. The fence is the holder's (kept in
 * the lock value) while held; when free, the key's bucket counter (or the key's legacy counter
 * if higher): at least the key's last fence, and the next grant's is higher (other keys of the
 * bucket raise it too). Waiters are counted by their places that have not lapsed. Reads only.
 */
export const INSPECT = script(`${HOLDER_LUA}
${FENCE_LUA}
checkBuckets(KEYS[7], ARGV[#ARGV], false)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('get', KEYS[1])
local fence = fenceOf(current) or lastFence(KEYS[2], KEYS[5])
local held = 0
if current then held = 1 end
return { held, fence, redis.call('pttl', KEYS[1]), redis.call('zcount', KEYS[4], '(' .. now, '+inf') }
`);

/**
 * KEYS: see the queue prelude · ARGV: bucket count. Frees the lock whoever holds it and hands
 * it to the first in line, as a release would: 1, else 0 (it was free). No counter goes down,
 * so the next grant's fence is higher than the removed holder's, and that holder's next EXTEND
 * finds the lock gone (or someone else's) and fails.
 */
export const FORCE_RELEASE = script(`${QUEUE_PRELUDE}
checkBuckets(KEYS[7], BUCKETS, true)
if redis.call('exists', KEYS[1]) == 0 then return 0 end
redis.call('del', KEYS[1])
local head = firstInLine()
if head then handOver(head) end
return 1
`);

/**
 * KEYS: bucket-count key · ARGV: bucket count wanted. The node's bucket count, recording the
 * wanted one first if the node has none (a fresh node, or one restarted empty).
 */
export const READ_BUCKETS = script(`
local have = redis.call('get', KEYS[1])
if have then return tonumber(have) end
redis.call('set', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
`);

/**
 * KEYS: bucket-count key, the old count's counters, the new count's counters · ARGV: old
 * count, new count. Moves a node to another bucket count in one atomic step: raises every new
 * counter to the largest old one (a key's new bucket then starts above every fence the key
 * had), deletes the old counters that are not new ones, records the new count. Refuses
 * ("FENCEBUCKETS <n>") if the node's count is no longer the old one (another instance moved it
 * meanwhile). Returns the largest old counter.
 */
export const MIGRATE_BUCKETS = script(`
local old, new = tonumber(ARGV[1]), tonumber(ARGV[2])
local have = redis.call('get', KEYS[1])
if have ~= ARGV[1] then error({err = 'FENCEBUCKETS ' .. (have or '0')}) end
local max, keep = 0, {}
for i = 2, old + 1 do max = math.max(max, tonumber(redis.call('get', KEYS[i]) or '0') or 0) end
for i = old + 2, old + new + 1 do
  keep[KEYS[i]] = true
  if (tonumber(redis.call('get', KEYS[i]) or '0') or 0) < max then redis.call('set', KEYS[i], max) end
end
for i = 2, old + 1 do
  if not keep[KEYS[i]] then redis.call('del', KEYS[i]) end
end
redis.call('set', KEYS[1], ARGV[2])
return max
`);

/**
 * KEYS: legacy per-key fence counter, its bucket counter, bucket-count key (single node only)
 * · ARGV: bucket count. The sweep of counters left by versions before buckets: raises the
 * bucket to the legacy counter and deletes it, as the key's next grant would. 1 if it was one.
 */
export const CARRY_LEGACY = script(`${FENCE_LUA}
checkBuckets(KEYS[3], ARGV[1], true)
local old = tonumber(redis.call('get', KEYS[1]) or '')
if not old then return 0 end
if (tonumber(redis.call('get', KEYS[2]) or '0') or 0) < old then redis.call('set', KEYS[2], old) end
redis.call('del', KEYS[1])
return 1
`);
