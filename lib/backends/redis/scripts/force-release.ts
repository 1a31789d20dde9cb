import { script } from '../port/redis-port';
import { FENCES_LUA, TIME_LUA, VALUES_LUA } from './lua-base';
import { HOLDERS_LUA } from './lua-holders';

/**
 * KEYS: see `ACQUIRE`. Frees the key whoever holds it (a mutex, or every
 * shared or counted holder) and hands it to the queue's heads, as a release would: 1, else 0
 * (it was free). No counter goes down, so the next grant's fence is higher than the removed
 * holders', and a removed holder's next renewal finds the lock gone (or someone else's) and
 * fails. A value this module did not write is refused, never deleted.
 */
export const FORCE_RELEASE = script(`${VALUES_LUA}${FENCES_LUA}
${TIME_LUA}${HOLDERS_LUA}
local S = holdersOf(true)
local had = #S.holders > 0 and 1 or 0
if S.kind ~= 'none' then redis.call('del', KEYS[1]) end
local freed = { kind = 'none', holders = {} }
admitQueue(freed, nil, 0, nil, {})
markQueued(freed)
return had
`);
