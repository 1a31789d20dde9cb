import { script } from '../port/redis-port';
import { FENCES_LUA } from './lua-base';

// A mutex's two hot operations on a key that nobody waits for, as lean as the store allows: the
// fewest KEYS, ARGV and calls, a number as the answer. Anything else answers nil, and the
// general script of the operation (`ACQUIRE`, `RELEASE`) decides: a held key, a queue, shared
// or counted holders, a value this module did not write.

/**
 * KEYS: lock, queue, fence bucket counter · ARGV: token, ttl ms. A free key nobody waits for is
 * taken with a fence drawn in the same step: the fence. Otherwise nil (nothing written).
 */
export const MUTEX_ACQUIRE = script(`${FENCES_LUA}
if redis.call('exists', KEYS[1], KEYS[2]) ~= 0 then return nil end
local fence = drawFence(KEYS[3])
redis.call('set', KEYS[1], ARGV[1] .. ' ' .. digits(fence), 'PX', ARGV[2])
return fence
`);

/**
 * KEYS: lock, queue · ARGV: token. Deletes the caller's own mutex when nobody waits for the key:
 * 1. A free key nobody waits for (the lease ran out): 0. Otherwise nil (nothing written).
 */
export const MUTEX_RELEASE = script(`
local current = redis.pcall('get', KEYS[1])
if current == false then
  if redis.call('exists', KEYS[2]) == 0 then return 0 end
  return nil
end
if type(current) ~= 'string' or string.sub(current, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return nil
end
if redis.call('exists', KEYS[2]) ~= 0 then return nil end
redis.call('del', KEYS[1])
return 1
`);
