import { script } from '../port/redis-port';
import { FENCES_LUA } from './lua-base';

// A mutex's two hot operations on a key that nobody waits for, as lean as the store allows: the
// fewest KEYS, ARGV and calls, a number as the answer (every call a script makes costs the cycle
// a few per cent). Anything else answers nil, and the general script of the operation
// (`ACQUIRE`, `RELEASE`) decides: a held key, a queue, shared or counted holders, a value this
// module did not write.

/**
 * KEYS: lock, queue, fence bucket counter · ARGV: token, ttl ms. A free key nobody waits for is
 * taken with a fence drawn in the same step: the fence. Otherwise nil (nothing written).
 */
export const MUTEX_ACQUIRE = script(`${FENCES_LUA}
if redis.call('exists', KEYS[1], KEYS[2]) ~= 0 then return nil end
local fence, text = drawFence(KEYS[3])
redis.call('set', KEYS[1], ARGV[1] .. ' ' .. text, 'PX', ARGV[2])
return fence
`);

/**
 * KEYS: lock · ARGV: token. Deletes the caller's own mutex when nobody queued for it (its value
 * carries no ` q` mark, see `markQueued` in `lua-holders.ts`): 1. Otherwise nil (nothing
 * written): a lock someone waits for, one no longer ours, a hash of shared holders.
 */
export const MUTEX_RELEASE = script(`
local current = redis.pcall('get', KEYS[1])
if type(current) ~= 'string' or string.byte(current, -1) == 113
   or string.sub(current, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return nil
end
redis.call('del', KEYS[1])
return 1
`);
