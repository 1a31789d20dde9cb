import { script } from '../redis/redis-scripts';

// Scripts run on each independent node of a Redlock set, one key each (no hash slots involved).

/**
 * KEYS: lock · ARGV: token, ttl ms. Renews this node's copy of our lock: 1 renewed, 0 no copy
 * here (the node restarted empty, or the copy expired), -1 someone else's. A missing copy is not
 * created here: only once a quorum renewed (see {@link RESTORE_COPY}), or a lock freed on every
 * node (`forceRelease`) would come back.
 */
export const RENEW_COPY = script(`
local current = redis.call('get', KEYS[1])
if current == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
if not current then return 0 end
return -1
`);

/**
 * KEYS: lock · ARGV: token, ttl ms. Puts a missing copy of a lock the quorum still holds back on
 * this node (`SET NX PX`), so that losing another node later does not lose the lock: 1 put back,
 * 0 the key is taken here meanwhile.
 */
export const RESTORE_COPY = script(`
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
`);

/**
 * KEYS: lock, fence · ARGV: none. This node's view of a key: `{holder token or '', PTTL, fence
 * counter (0: never granted)}`. Reads only.
 */
export const INSPECT_COPY = script(`
return {
  redis.call('get', KEYS[1]) or '',
  redis.call('pttl', KEYS[1]),
  tonumber(redis.call('get', KEYS[2]) or '0')
}
`);

/** KEYS: lock · ARGV: none. Deletes this node's copy whoever holds it; returns its token or ''. */
export const DELETE_COPY = script(`
local current = redis.call('get', KEYS[1])
if current then redis.call('del', KEYS[1]) end
return current or ''
`);
