import { script } from '../port/redis-port';
import { FENCES_LUA, TIME_LUA, VALUES_LUA } from './lua-base';
import { HOLDERS_LUA } from './lua-holders';

/**
 * KEYS: lock, queue, fence bucket counter, waiter expiries, arrival counter · ARGV: token, ttl
 * ms, waiter ttl ms (0 = one attempt, do not queue), queue member ("<lease ms> <tagged token>
 * <channel>", '' for none), mode (`s`|`x`), permits.
 *
 * `{1, fence, slot}`: taken now (its turn in the queue, or nobody queued and the holders admit
 * it), with a fence drawn from the key's bucket in the same atomic step. `{2, fence, slot}`: the
 * caller already held it (a release handed it over). `{-1, permits}`: refused, the key is held
 * or awaited with those permits. Otherwise `{0, ms}`: how long until the earliest holder's lease
 * ends (-1: no hint), the caller queued (or its place refreshed: it lapses after the waiter ttl
 * without one) when it may wait. Anyone queued holds back a newcomer, so a waiting writer holds
 * back new readers (writer preference) and nobody barges.
 *
 * The fast path, a mutex asked of a free key nobody waits for (or of a mutex key, once), reads
 * the lock and the queue and writes the lock and the counter: nothing of the general path runs.
 * The general path first settles the key: expired holders dropped and the queue's heads
 * admitted while they fit.
 */
export const ACQUIRE = script(`${VALUES_LUA}${FENCES_LUA}
local token, ttl, waiterTtl, member = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local mode, permits = ARGV[5], tonumber(ARGV[6])
if mode == 'x' and permits == 1 then
  local current = redis.pcall('get', KEYS[1])
  if current == false then
    if redis.call('exists', KEYS[2]) == 0 then
      local fence, text = drawFence(KEYS[3])
      redis.call('set', KEYS[1], token .. ' ' .. text, 'PX', ttl)
      return {1, fence, 0}
    end
  elseif type(current) == 'string' then
    local holder, fence = mutexValue(current)
    if not holder then foreign('string') end
    if holder == token then return {2, fence, 0} end
    if waiterTtl == 0 then return {0, redis.call('pttl', KEYS[1])} end
  end
end
${TIME_LUA}${HOLDERS_LUA}
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
markQueued(S)
if held then return {2, held.fence or lastFence(KEYS[3]), held.slot} end
if mine then return {1, mine.fence, mine.slot} end
if waiterTtl > 0 then
  if not redis.call('zscore', KEYS[2], member) then
    redis.call('zadd', KEYS[2], redis.call('incr', KEYS[5]), member)
  end
  redis.call('zadd', KEYS[4], now + waiterTtl, member)
  for _, i in ipairs({2, 4, 5}) do redis.call('pexpire', KEYS[i], 2 * waiterTtl) end
  markQueued(S)
end
if S.kind == 'mutex' then return {0, redis.call('pttl', KEYS[1])} end
local earliest
for _, h in ipairs(S.holders) do earliest = math.min(earliest or h.expiry, h.expiry) end
return {0, earliest and earliest - now or -1}
`);
