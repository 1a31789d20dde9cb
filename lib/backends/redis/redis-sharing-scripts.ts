import { HOLDER_LUA, QUEUE_PRELUDE, script } from './redis-scripts';

// Shared (read/write) and counted locks on Redis. A mutex (exclusive, one permit) keeps its
// plain string `<token> <fence>` and its own scripts (redis-scripts.ts) untouched: this file adds
// the other layout and the scripts that understand both.
//
// Layout: while a key has shared or counted holders, its lock name is a hash, one field per
// holder: token -> "<mode> <permits> <slot> <expiry> <fence>" (mode `s` shared or `x`
// exclusive, expiry in server ms). Redis 7.0 has no per-field expiry (HEXPIRE is 7.4), so each
// holder's expiry is kept in its value, every script that touches the key drops the holders
// whose lease ran out, and the key's own PEXPIREAT is the latest holder's expiry: a key whose
// holders all died disappears by itself. The mutex scripts meet a hash with WRONGTYPE, and the
// backend reruns the call with the script here (a writer among readers, a release of a reader).
//
// Waiters of every kind share the mutex's FIFO queue (a counted slot that a release frees may go
// to the releasing process's own waiter a bounded number of places early: OVERTAKE_PER_PERMIT).
// A queue member is "<channel> <hand-over lease ms> <tagged token>", the token tagged with what
// it asks: `<token>` a mutex, `<token>|s` shared, `<token>|p<n>` one of n permits. The tag rides
// inside the token part, so the mutex scripts' hand-over still parses every member: one of them
// hands a free key to a tagged head as the string `<token>|<tag> <fence>`, which the real token
// does not own as a mutex; the next script here that touches the key turns that string into the
// hash (the waiter, told of it, asks once more and so does it at once).

/**
 * How far a released counted slot may skip ahead in the queue, per permit: the releasing process
 * hands it to its own longest-waiting waiter of the same request instead of another process's
 * head, if that waiter arrived at most `OVERTAKE_PER_PERMIT * permits` after the head. The
 * process is running already, while the head's process would have to wake up (a cross-process
 * wake-up costs more than the rest of a hand-off on a busy or small host), and the slot's next
 * holder learns of it from the release's reply instead of a message. The bound is on arrival
 * numbers, each used once, so a waiter is overtaken at most `OVERTAKE_PER_PERMIT * permits`
 * times: its wait grows by at most that many hand-offs, about `OVERTAKE_PER_PERMIT` holds.
 * Shared and exclusive requests keep strict queue order (writer preference rests on it).
 */
export const OVERTAKE_PER_PERMIT = 2;

/**
 * Lua helpers on hash holders that need no KEYS. `parseHolder(token, value)` and
 * `holderValue(holder)` read and write a field (`parseHolder` is nil for a field that is not
 * one of ours: the hash is someone else's); `requestOf(tagged)` splits a queue member's tagged
 * token into `token, mode ('s'|'x'), permits`. `WRONGTYPE` is the error a hash that is not ours
 * gets, as a mutex script's GET on any other type would.
 */
const HASH_HOLDER_LUA = `
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local function parseHolder(token, value)
  local mode, permits, slot, expiry, fence =
    string.match(value, '^([sx]) (%d+) (%d+) (%d+) (%d+)$')
  if not mode then return nil end
  return { token = token, mode = mode, permits = tonumber(permits), slot = tonumber(slot),
           expiry = tonumber(expiry), fence = tonumber(fence) }
end
local function holderValue(h)
  return h.mode .. ' ' .. h.permits .. ' ' .. h.slot .. ' ' .. h.expiry .. ' ' .. h.fence
end
local function requestOf(tagged)
  local token, tag, n = string.match(tagged, '^(.+)|([sp])(%d*)$')
  if not token then return tagged, 'x', 1 end
  if tag == 's' then return token, 's', 1 end
  return token, 'x', tonumber(n)
end
`;

/**
 * Lua helpers on one key's holders, after the queue prelude (same KEYS). `now` is the server's
 * time, read once per script. A state `S` is `{ kind = 'none'|'mutex'|'hash', holders = {...},
 * dirty }`, the holders live ones only, `dirty` once the hash was written.
 * - `holdersOf(write)`: reads the key; with `write`, drops expired hash holders and turns a
 *   tagged hand-over string into the hash (without, it only reads).
 * - `headOf()`: the queue's first live waiter, or nil. The first call of a script drops the
 *   waiters whose place lapsed; later ones only read the head (a script only takes members out
 *   of the queue before it queues its caller, last).
 * - `full(S)`: no request of any kind fits beside the holders (a mutex, or as many counted
 *   holders as permits): then the queue is not even read.
 * - `fits(S, mode, permits)`: whether the holders admit such a request: anything on a free key,
 *   a shared one beside shared holders, a counted one beside holders of the same count while a
 *   slot is free; nothing beside a mutex.
 * - `grant(S, token, mode, permits, lease)`: a fresh fence from the key's bucket; a mutex as the
 *   plain string (only on a free key), anything else as a hash field with the lowest free slot.
 * - `drop(S, token)`: removes that token's hold: 1, or 0 when it holds nothing (expired).
 * - `standIn(mode, permits, ownChannel)`: for a counted head of another process, the first
 *   waiter of `ownChannel` asking the same, if it arrived at most `OVERTAKE_PER_PERMIT *
 *   permits` after the head (arrival numbers, the queue's scores); else nil.
 * - `admitQueue(S, self, selfTtl, ownChannel, told)`: hands the key to the queue's heads, in
 *   order, while they fit (readers behind a leaving writer enter together), each for its
 *   hand-over lease, told on its channel ("<tagged token> <fence> <slot>"); the caller's own
 *   place (`self`) gets its ttl and no message. With `ownChannel` (the caller's), the heads
 *   waiting on that channel get no message either: their hand-overs go to the list `told`, in
 *   order, for the caller to tell them; and a counted slot goes to the `standIn` when there is
 *   one (see `OVERTAKE_PER_PERMIT`).
 * - `settle(S)`: once the hash was written, its expiry becomes its latest holder's (or the key
 *   goes, without one); a hash left as it was keeps the expiry it has.
 * - `agreedPermits(S, self)`: the permits a busy key's holders (else its first waiter, if not the
 *   caller) asked for; nil when idle.
 * - `dropAndPassOn(token, ownChannel)`: drops that token's hold and passes the key on to the
 *   queue's heads that now fit: `{1 (dropped) or 0, hand-over...}`, the hand-overs those to
 *   `ownChannel`'s waiters (see `admitQueue`).
 */
const SHARING_LUA = `
${HASH_HOLDER_LUA}
local OVERTAKE_PER_PERMIT = ${OVERTAKE_PER_PERMIT}
local now = serverNow()
local function holdersOf(write)
  local kind = redis.call('type', KEYS[1]).ok
  local holders = {}
  if kind == 'string' then
    local value = redis.call('get', KEYS[1])
    local owner, fence = string.match(value, '^(%S+) (%d+)$')
    local token, mode, permits = requestOf(owner or value)
    local left = redis.call('pttl', KEYS[1])
    holders[1] = { token = token, mode = mode, permits = permits, slot = 0,
                   expiry = now + math.max(left, 0), fence = tonumber(fence) }
    if mode == 'x' and permits == 1 then return { kind = 'mutex', holders = holders } end
    -- A mutex script handed the free key to this tagged waiter: it becomes a hash holder.
    if write then
      redis.call('del', KEYS[1])
      redis.call('hset', KEYS[1], token, holderValue(holders[1]))
    end
    return { kind = 'hash', holders = holders, dirty = write }
  elseif kind == 'hash' then
    local flat, all, dirty = redis.call('hgetall', KEYS[1]), {}, false
    for i = 1, #flat, 2 do
      all[#all + 1] = parseHolder(flat[i], flat[i + 1]) or error({ err = WRONGTYPE })
    end
    for _, h in ipairs(all) do
      if h.expiry > now then
        holders[#holders + 1] = h
      elseif write then
        redis.call('hdel', KEYS[1], h.token)
        dirty = true
      end
    end
    return { kind = 'hash', holders = holders, dirty = dirty }
  end
  return { kind = 'none', holders = holders }
end
local swept = false
local function headOf()
  if not swept then
    swept = true
    if redis.call('exists', KEYS[3]) == 0 then return nil end
    local dropped = redis.call('zrangebyscore', KEYS[4], '-inf', now)
    if #dropped > 0 then
      redis.call('zrem', KEYS[3], unpack(dropped))
      redis.call('zremrangebyscore', KEYS[4], '-inf', now)
    end
  end
  return redis.call('zrange', KEYS[3], 0, 0)[1]
end
local function find(S, token)
  for i, h in ipairs(S.holders) do
    if h.token == token then return h, i end
  end
  return nil
end
local function full(S)
  local first = S.holders[1]
  return first ~= nil and first.mode == 'x' and #S.holders >= first.permits
end
local function fits(S, mode, permits)
  local first = S.holders[1]
  if not first then return true end
  if mode == 's' then return first.mode == 's' end
  return first.mode == 'x' and permits > 1 and first.permits == permits and #S.holders < permits
end
local function grant(S, token, mode, permits, lease)
  local h = { token = token, mode = mode, permits = permits, slot = 0,
              expiry = now + lease, fence = drawFence(KEYS[2], KEYS[5]) }
  if mode == 'x' and permits == 1 then
    redis.call('set', KEYS[1], token .. ' ' .. h.fence, 'PX', lease)
    S.kind = 'mutex'
  else
    if mode == 'x' then
      local used = {}
      for _, other in ipairs(S.holders) do used[other.slot] = true end
      while used[h.slot] do h.slot = h.slot + 1 end
    end
    redis.call('hset', KEYS[1], token, holderValue(h))
    S.kind = 'hash'
    S.dirty = true
  end
  S.holders[#S.holders + 1] = h
  return h
end
local function drop(S, token)
  local h, i = find(S, token)
  if not h then return 0 end
  if S.kind == 'mutex' then redis.call('del', KEYS[1]) else redis.call('hdel', KEYS[1], token) end
  table.remove(S.holders, i)
  S.dirty = true
  if #S.holders == 0 then S.kind = 'none' end
  return 1
end
local function standIn(mode, permits, ownChannel)
  local window = OVERTAKE_PER_PERMIT * permits
  local near = redis.call('zrange', KEYS[3], 0, window, 'WITHSCORES')
  local last = tonumber(near[2]) + window
  local prefix = ownChannel .. ' '
  for i = 3, #near, 2 do
    if tonumber(near[i + 1]) > last then return nil end
    local member = near[i]
    if string.sub(member, 1, #prefix) == prefix then
      local channel, lease, tagged = string.match(member, '^(%S+) (%d+) (%S+)$')
      local token, m, p = requestOf(tagged)
      if m == mode and p == permits then return member, channel, lease, tagged, token end
    end
  end
  return nil
end
local function admitQueue(S, self, selfTtl, ownChannel, told)
  while not full(S) do
    local head = headOf()
    if not head then return end
    local channel, lease, tagged = string.match(head, '^(%S+) (%d+) (%S+)$')
    local token, mode, permits = requestOf(tagged)
    if not fits(S, mode, permits) then return end
    if ownChannel and channel ~= ownChannel and mode == 'x' and permits > 1 then
      local member, c, l, t, k = standIn(mode, permits, ownChannel)
      if member then head, channel, lease, tagged, token = member, c, l, t, k end
    end
    local h = grant(S, token, mode, permits, head == self and selfTtl or tonumber(lease))
    redis.call('zrem', KEYS[3], head)
    redis.call('zrem', KEYS[4], head)
    if channel == ownChannel then
      told[#told + 1] = tagged .. ' ' .. h.fence .. ' ' .. h.slot
    elseif head ~= self then
      -- pcall: an ACL user without channel rights still hands over; the waiter polls instead.
      redis.pcall('publish', channel, tagged .. ' ' .. h.fence .. ' ' .. h.slot)
    end
  end
end
local function settle(S)
  if S.kind ~= 'hash' or not S.dirty then return end
  local latest = 0
  for _, h in ipairs(S.holders) do latest = math.max(latest, h.expiry) end
  if latest > 0 then redis.call('pexpireat', KEYS[1], latest) else redis.call('del', KEYS[1]) end
end
local function agreedPermits(S, self)
  if S.holders[1] then return S.holders[1].permits end
  local head = headOf()
  if not head or head == self then return nil end
  local _, _, permits = requestOf(string.match(head, '^%S+ %d+ (%S+)$'))
  return permits
end
local function dropAndPassOn(token, ownChannel)
  local S = holdersOf(true)
  local reply = { drop(S, token) }
  admitQueue(S, nil, 0, ownChannel, reply)
  settle(S)
  return reply
end
`;

/**
 * KEYS: see the queue prelude · ARGV: token, ttl ms, waiter ttl ms (0 = one attempt, do not
 * queue), queue member ("<channel> <lease ms> <tagged token>", '' for none), mode (`s`|`x`),
 * permits, bucket count.
 *
 * First the key is settled: expired holders dropped, a tagged hand-over turned into the hash,
 * and the queue's heads admitted while they fit (what expired holders freed goes on in FIFO
 * order). Then: `{2, fence, slot}` the caller already held it (handed over); `{1, fence, slot}`
 * taken now (its turn in the queue, or nobody queued and the holders admit it); `{-1, permits}`
 * refused: the key is held or awaited with those permits; otherwise `{0, ms}`: how long until
 * the earliest holder's lease ends (-1: no hint), the caller queued (or its place refreshed)
 * when it may wait. Anyone queued holds back a newcomer, so a waiting writer holds back new
 * readers (writer preference) and nobody barges.
 */
export const SHARED_ACQUIRE = script(`${QUEUE_PRELUDE}
${SHARING_LUA}
checkBuckets(KEYS[7], BUCKETS, true)
local token, ttl, waiterTtl, member = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local mode, permits = ARGV[5], tonumber(ARGV[6])
local S = holdersOf(true)
local held = find(S, token)
if not held then
  local agreed = agreedPermits(S, member)
  if agreed and agreed ~= permits then
    settle(S)
    return {-1, agreed}
  end
end
admitQueue(S, member, ttl)
local mine = find(S, token)
if not mine and fits(S, mode, permits) and not headOf() then
  mine = grant(S, token, mode, permits, ttl)
end
settle(S)
if held then return {2, held.fence or lastFence(KEYS[2], KEYS[5]), held.slot} end
if mine then return {1, mine.fence, mine.slot} end
if waiterTtl > 0 then
  if not redis.call('zscore', KEYS[3], member) then
    redis.call('zadd', KEYS[3], redis.call('incr', KEYS[6]), member)
  end
  redis.call('zadd', KEYS[4], now + waiterTtl, member)
  for _, i in ipairs({3, 4, 6}) do redis.call('pexpire', KEYS[i], 2 * waiterTtl) end
end
if S.kind == 'mutex' then return {0, redis.call('pttl', KEYS[1])} end
local earliest
for _, h in ipairs(S.holders) do earliest = math.min(earliest or h.expiry, h.expiry) end
return {0, earliest and earliest - now or -1}
`);

/**
 * KEYS: see the queue prelude · ARGV: token, the caller's wake-up channel, bucket count (the
 * mutex's `RELEASE` reads the same ARGV: token first, count last). Drops only the caller's own
 * hold (a hash field, or a plain string it owns) and admits the queue's heads that now fit (a
 * counted slot first to the caller's own waiter within the bound of `OVERTAKE_PER_PERMIT`):
 * `{1, hand-over...}`, else `{0, hand-over...}` (its lease ran out, or it held nothing). The
 * heads that wait on the caller's channel are not published to: their "<tagged token> <fence>
 * <slot>" come back in the reply, so the releasing process hands its own waiters their slot
 * without a message going round through the subscriber connection.
 */
export const SHARED_RELEASE = script(`${QUEUE_PRELUDE}
${SHARING_LUA}
checkBuckets(KEYS[7], BUCKETS, true)
return dropAndPassOn(ARGV[1], ARGV[2])
`);

/**
 * KEYS: see the queue prelude · ARGV: queue member, token, bucket count. A waiter that gives up
 * leaves the queue; whatever was handed to it meanwhile is dropped, and the heads that now fit
 * (readers behind a leaving writer) are admitted.
 */
export const SHARED_LEAVE = script(`${QUEUE_PRELUDE}
${SHARING_LUA}
checkBuckets(KEYS[7], BUCKETS, true)
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
dropAndPassOn(ARGV[2], nil)
return 1
`);

/**
 * KEYS: see the queue prelude · ARGV: bucket count. What `LockService.inspect` reports of a key
 * of any layout: `{held (0|1), fence, lease left ms, live waiters, holders, mode, permits,
 * slot...}`. The fence is the latest live holder's (a fenced store must accept it); when free,
 * the bucket counter (at least the key's last fence). The lease left is the latest holder's:
 * the key stays held until then. Reads only.
 */
export const SHARED_INSPECT = script(`${QUEUE_PRELUDE}
${SHARING_LUA}
checkBuckets(KEYS[7], BUCKETS, false)
local S = holdersOf(false)
local waiting = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
if not S.holders[1] then return {0, lastFence(KEYS[2], KEYS[5]), -1, waiting, 0} end
local fence, latest, slots = 0, 0, {}
for _, h in ipairs(S.holders) do
  fence = math.max(fence, h.fence or 0)
  latest = math.max(latest, h.expiry)
  slots[#slots + 1] = h.slot
end
table.sort(slots)
local first = S.holders[1]
local reply = {1, fence, latest - now, waiting, #S.holders, first.mode, first.permits}
for _, slot in ipairs(slots) do reply[#reply + 1] = slot end
return reply
`);

/**
 * KEYS: n locks · ARGV: n tokens, then n ttls (ms), or one ttl for all. `EXTEND_MANY` for keys
 * of either layout: a hash holder's expiry (and the key's, to its latest holder's), or a plain
 * string the token owns. Per key, in order: 1 renewed, 0 not ours (expired, released, never),
 * or the error a key of another type gets, as a string (that lease fails alone).
 */
export const SHARED_EXTEND_MANY = script(`
if redis.replicate_commands then redis.replicate_commands() end
${HOLDER_LUA}
${HASH_HOLDER_LUA}
local n = #KEYS
local one = #ARGV == n + 1
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = {}
for i = 1, n do
  local ttl = tonumber(one and ARGV[n + 1] or ARGV[n + i])
  local kind = redis.call('type', KEYS[i]).ok
  renewed[i] = 0
  local flat, all = {}, {}
  if kind == 'hash' then
    flat = redis.call('hgetall', KEYS[i])
    for j = 1, #flat, 2 do all[#all + 1] = parseHolder(flat[j], flat[j + 1]) end
    -- A field that is not a holder: the hash is not ours, and that key fails alone.
    if #all * 2 ~= #flat then kind = 'other' end
  end
  if kind == 'hash' then
    local latest = 0
    for _, h in ipairs(all) do
      if h.expiry <= now then
        redis.call('hdel', KEYS[i], h.token)
      else
        if h.token == ARGV[i] then
          h.expiry = now + ttl
          redis.call('hset', KEYS[i], h.token, holderValue(h))
          renewed[i] = 1
        end
        latest = math.max(latest, h.expiry)
      end
    end
    if latest > 0 then redis.call('pexpireat', KEYS[i], latest) end
  elseif kind == 'string' then
    if owns(redis.call('get', KEYS[i]), ARGV[i]) then
      renewed[i] = redis.call('pexpire', KEYS[i], ttl)
    end
  elseif kind ~= 'none' then
    renewed[i] = WRONGTYPE
  end
end
return renewed
`);
