import { script } from '../port/redis-port';
import { FENCES_LUA, TIME_LUA, VALUES_LUA } from './lua-base';
import { HOLDERS_LUA } from './lua-holders';

/**
 * KEYS: see `ACQUIRE` · ARGV: queue member, token. A waiter that gives up leaves
 * the queue; whatever was handed to it meanwhile is dropped, and the heads that now fit (the
 * next in line, readers behind a leaving writer) are admitted.
 */
export const LEAVE = script(`${VALUES_LUA}${FENCES_LUA}
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
${TIME_LUA}${HOLDERS_LUA}
local S = holdersOf(true)
drop(S, ARGV[2])
admitQueue(S, nil, 0, nil, {})
settle(S)
markQueued(S)
return 1
`);
