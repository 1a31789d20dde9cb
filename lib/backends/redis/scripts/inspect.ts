import { script } from '../port/redis-port';
import { FENCES_LUA, TIME_LUA, VALUES_LUA } from './lua-base';
import { HOLDERS_LUA } from './lua-holders';

/**
 * KEYS: see `ACQUIRE`. What `LockService.inspect` reports of a key:
 * `{held (0|1), fence, lease left ms, live waiters}` for a free key, the same and the holder's
 * token for a mutex, and for shared or counted holders `holders, mode, permits, slot...` after
 * the first four. The fence is the latest live holder's
 * (a fenced store must accept it); when free, the bucket counter (at least the key's last fence,
 * and the next grant's is higher). The lease left is the latest holder's: the key stays held
 * until then. Waiters are counted by their places that have not lapsed. Reads only.
 */
export const INSPECT = script(`${VALUES_LUA}${FENCES_LUA}
${TIME_LUA}${HOLDERS_LUA}
local S = holdersOf(false)
local waiting = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
if not S.holders[1] then return {0, lastFence(KEYS[3]), -1, waiting} end
if S.kind == 'mutex' then
  return {1, S.holders[1].fence, redis.call('pttl', KEYS[1]), waiting, S.holders[1].token}
end
local fence, latest, slots = 0, 0, {}
for _, h in ipairs(S.holders) do
  fence = math.max(fence, h.fence)
  latest = math.max(latest, h.expiry)
  slots[#slots + 1] = h.slot
end
table.sort(slots)
local first = S.holders[1]
local reply = {1, fence, latest - now, waiting, #S.holders, first.mode, first.permits}
for _, slot in ipairs(slots) do reply[#reply + 1] = slot end
return reply
`);
