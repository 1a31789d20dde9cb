import { script } from '../port/redis-port';
import { FENCES_LUA, TIME_LUA, VALUES_LUA } from './lua-base';
import { HOLDERS_LUA } from './lua-holders';

/**
 * KEYS: see `ACQUIRE` · ARGV: token, the caller's wake-up channel. Drops only the
 * caller's own hold (its mutex string, or its hash field) and hands the key to the queue's heads
 * that now fit (a counted slot first to the caller's own waiter within the bound of
 * `OVERTAKE_PER_PERMIT`): `{1, hand-over...}`, else `{0, hand-over...}` (its lease ran out, or it
 * held nothing). The heads that wait on the caller's channel are not published to: their
 * "<tagged token> <fence> <slot>" come back in the reply, so the releasing process tells its own
 * waiters without a message going round through the subscriber connection. A mutex nobody waits
 * for is deleted on the fast path.
 */
export const RELEASE = script(`${VALUES_LUA}${FENCES_LUA}
local token, dropped = ARGV[1], nil
local current = redis.pcall('get', KEYS[1])
if type(current) == 'string' then
  local holder = mutexValue(current)
  if not holder then foreign('string') end
  if holder ~= token then return {0} end
  redis.call('del', KEYS[1])
  if redis.call('exists', KEYS[2]) == 0 then return {1} end
  dropped = 1
elseif current == false and redis.call('exists', KEYS[2]) == 0 then
  return {0}
end
${TIME_LUA}${HOLDERS_LUA}
local S = holdersOf(true)
local reply = { dropped or drop(S, token) }
admitQueue(S, nil, 0, ARGV[2], reply)
settle(S)
markQueued(S)
return reply
`);
