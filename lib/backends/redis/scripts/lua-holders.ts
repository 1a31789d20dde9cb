// The general path of the queue scripts: a key's holders of any kind and its FIFO queue.
//
// A mutex (exclusive, one permit) held alone is the string `<token> <fence>` at the lock's name
// with the lease as its expiry: the fast paths of the scripts serve it without this file. Shared
// and counted holders keep a hash at the lock's name, one field per holder: token ->
// "<mode> <permits> <slot> <expiry> <fence>" (mode `s` shared or `x` exclusive, expiry in server
// ms). Redis 7.0 has no per-field expiry (HEXPIRE is 7.4), so each holder's expiry is kept in its
// value, every script that touches the key drops the holders whose lease ran out, and the key's
// own PEXPIREAT is the latest holder's expiry: a key whose holders all died disappears by itself.
//
// Waiters of every kind share one FIFO queue (sorted set by arrival number) and a second sorted
// set of the server time each place lapses. A member is "<hand-over lease ms> <tagged token>
// <channel>", the token tagged with what it asks: `<token>` a mutex, `<token>|s` shared,
// `<token>|p<n>` one of n permits; the channel (last: it may contain spaces) is where its
// process hears of a hand-over.

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
 * Lua helpers on one key's holders and queue, after `VALUES_LUA`, `FENCES_LUA` and `TIME_LUA`.
 * KEYS: see `ACQUIRE` (lock, queue, counter, waiter expiries, arrivals). `now` is the server's time, read once. A state `S` is `{ kind =
 * 'none'|'mutex'|'hash', holders = {...}, dirty }`, the holders live ones only, `dirty` once the
 * hash was written.
 * - `holdersOf(write)`: reads the key (refusing a value this module did not write); with
 *   `write`, drops expired hash holders.
 * - `headOf()`: the queue's first live waiter, or nil. The first call of a script drops the
 *   waiters whose place lapsed; later ones only read the head.
 * - `memberOf(member)`: a queue member's hand-over lease, tagged token and channel.
 * - `requestOf(tagged)`: a tagged token's `token, mode ('s'|'x'), permits`.
 * - `full(S)`: no request of any kind fits beside the holders (a mutex, or as many counted
 *   holders as permits): then the queue is not even read.
 * - `fits(S, mode, permits)`: whether the holders admit such a request: anything on a free key,
 *   a shared one beside shared holders, a counted one beside holders of the same count while a
 *   slot is free; nothing beside a mutex.
 * - `grant(S, token, mode, permits, lease)`: a fresh fence from the key's bucket; a mutex as the
 *   plain string (only on a free key), anything else as a hash field with the lowest free slot.
 * - `drop(S, token)`: removes that token's hold: 1, or 0 when it holds nothing (expired).
 * - `admitQueue(S, self, selfTtl, ownChannel, told)`: hands the key to the queue's heads, in
 *   order, while they fit (readers behind a leaving writer enter together), each for its
 *   hand-over lease, told on its channel ("<tagged token> <fence> <slot>"); the caller's own
 *   place (`self`) gets its ttl and no message. With `ownChannel` (the caller's), the heads
 *   waiting on that channel get no message either: their hand-overs go to the list `told`, in
 *   order, for the caller to tell them; and a counted slot goes to the releasing process's own
 *   waiter within the bound of `OVERTAKE_PER_PERMIT`.
 * - `settle(S)`: once the hash was written, its expiry becomes its latest holder's (or the key
 *   goes, without one); a hash left as it was keeps the expiry it has.
 * - `agreedPermits(S, self)`: the permits a busy key's holders (else its first waiter, if not the
 *   caller) asked for; nil when idle.
 * - `markQueued(S)`: a mutex someone queued for gets its value marked (`<token> <fence> q`, its
 *   expiry kept), so that its release, which reads the value anyway, knows to hand it on without
 *   looking at the queue. Every script that can queue a caller or grant a mutex ends with it.
 */
export const HOLDERS_LUA = `
local OVERTAKE_PER_PERMIT = ${OVERTAKE_PER_PERMIT}
local now = serverNow()
local function parseHolder(token, value)
  local mode, permits, slot, expiry, fence =
    string.match(value, '^([sx]) (%d+) (%d+) (%d+) (%d+)$')
  if not mode then return nil end
  return { token = token, mode = mode, permits = tonumber(permits), slot = tonumber(slot),
           expiry = tonumber(expiry), fence = tonumber(fence) }
end
local function holderValue(h)
  return h.mode .. ' ' .. h.permits .. ' ' .. h.slot .. ' ' .. h.expiry .. ' ' .. digits(h.fence)
end
local function memberOf(member)
  local lease, tagged, channel = string.match(member, '^(%d+) (%S+) (.+)$')
  return tonumber(lease), tagged, channel
end
local function requestOf(tagged)
  local token, tag, n = string.match(tagged, '^(.+)|([sp])(%d*)$')
  if not token then return tagged, 'x', 1 end
  if tag == 's' then return token, 's', 1 end
  return token, 'x', tonumber(n)
end
local function holdersOf(write)
  local kind = redis.call('type', KEYS[1]).ok
  local holders = {}
  if kind == 'string' then
    local token, fence = mutexValue(redis.call('get', KEYS[1]))
    if not token then foreign('string') end
    local left = redis.call('pttl', KEYS[1])
    holders[1] = { token = token, mode = 'x', permits = 1, slot = 0,
                   expiry = now + math.max(left, 0), fence = fence }
    return { kind = 'mutex', holders = holders }
  elseif kind == 'hash' then
    local flat, all, dirty = redis.call('hgetall', KEYS[1]), {}, false
    for i = 1, #flat, 2 do
      all[#all + 1] = parseHolder(flat[i], flat[i + 1]) or foreign('hash')
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
  elseif kind ~= 'none' then
    foreign(kind)
  end
  return { kind = 'none', holders = holders }
end
local swept = false
local function headOf()
  if not swept then
    swept = true
    if redis.call('exists', KEYS[2]) == 0 then return nil end
    local dropped = redis.call('zrangebyscore', KEYS[4], '-inf', now)
    if #dropped > 0 then
      redis.call('zrem', KEYS[2], unpack(dropped))
      redis.call('zremrangebyscore', KEYS[4], '-inf', now)
    end
  end
  return redis.call('zrange', KEYS[2], 0, 0)[1]
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
              expiry = now + lease, fence = drawFence(KEYS[3]) }
  if mode == 'x' and permits == 1 then
    redis.call('set', KEYS[1], token .. ' ' .. digits(h.fence), 'PX', lease)
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
  local near = redis.call('zrange', KEYS[2], 0, window, 'WITHSCORES')
  local last = tonumber(near[2]) + window
  for i = 3, #near, 2 do
    if tonumber(near[i + 1]) > last then return nil end
    local member = near[i]
    local lease, tagged, channel = memberOf(member)
    if channel == ownChannel then
      local token, m, p = requestOf(tagged)
      if m == mode and p == permits then return member, lease, tagged, channel end
    end
  end
  return nil
end
local function admitQueue(S, self, selfTtl, ownChannel, told)
  while not full(S) do
    local head = headOf()
    if not head then return end
    local lease, tagged, channel = memberOf(head)
    local token, mode, permits = requestOf(tagged)
    if not fits(S, mode, permits) then return end
    if ownChannel and channel ~= ownChannel and mode == 'x' and permits > 1 then
      local member, l, t, c = standIn(mode, permits, ownChannel)
      if member then
        head, lease, tagged, channel = member, l, t, c
        token = requestOf(tagged)
      end
    end
    local h = grant(S, token, mode, permits, head == self and selfTtl or lease)
    redis.call('zrem', KEYS[2], head)
    redis.call('zrem', KEYS[4], head)
    if channel == ownChannel then
      told[#told + 1] = tagged .. ' ' .. digits(h.fence) .. ' ' .. h.slot
    elseif head ~= self then
      -- pcall: an ACL user without channel rights still hands over; the waiter polls instead.
      redis.pcall('publish', channel, tagged .. ' ' .. digits(h.fence) .. ' ' .. h.slot)
    end
  end
end
local function settle(S)
  if S.kind ~= 'hash' or not S.dirty then return end
  local latest = 0
  for _, h in ipairs(S.holders) do latest = math.max(latest, h.expiry) end
  if latest > 0 then redis.call('pexpireat', KEYS[1], latest) else redis.call('del', KEYS[1]) end
end
local function markQueued(S)
  if S.kind ~= 'mutex' or redis.call('exists', KEYS[2]) == 0 then return end
  local value = redis.call('get', KEYS[1])
  if string.byte(value, -1) ~= 113 then redis.call('set', KEYS[1], value .. ' q', 'KEEPTTL') end
end
local function agreedPermits(S, self)
  if S.holders[1] then return S.holders[1].permits end
  local head = headOf()
  if not head or head == self then return nil end
  local _, tagged = memberOf(head)
  local _, _, permits = requestOf(tagged)
  return permits
end
`;
