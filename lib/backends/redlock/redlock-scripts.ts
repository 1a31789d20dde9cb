import { FENCE_LUA, HOLDER_LUA, script } from '../redis/redis-scripts';

// Scripts run on each independent node of a Redlock set (no hash slots involved). A copy's
// value is `<token>` as redlock's lock script writes it, then `<token> <fence>` once the
// fencing round tagged it; every comparison is on the token part.

/**
 * KEYS: n locks · ARGV: n tokens, then n ttls (ms). Renews this node's copies of our locks:
 * per key two entries, `1, <value>` renewed (the value, to put missing copies back with),
 * `0, ''` no copy here (the node restarted empty, or the copy expired), `-1, ''` someone
 * else's, `-2, <error>` the key's own error (a key of another type: that lease fails on this
 * node alone, not the whole batch). A missing copy is not created here: only once a quorum renewed (see
 * {@link RESTORE_COPIES}), or a lock freed on every node (`forceRelease`) would come back.
 */
export const RENEW_COPIES = script(`${HOLDER_LUA}
local n = #KEYS
local out = {}
for i = 1, n do
  local current = redis.pcall('get', KEYS[i])
  if type(current) == 'table' and current.err then
    out[2 * i - 1], out[2 * i] = -2, current.err
  elseif owns(current, ARGV[i]) then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[2 * i - 1], out[2 * i] = 1, current
  elseif not current then
    out[2 * i - 1], out[2 * i] = 0, ''
  else
    out[2 * i - 1], out[2 * i] = -1, ''
  end
end
return out
`);

/**
 * KEYS: n locks · ARGV: n values, then n ttls (ms). Puts missing copies of locks the quorum
 * still holds back on this node (`SET NX PX`), so that losing another node later does not lose
 * the lock: per key 1 put back, 0 the key is taken here meanwhile.
 */
export const RESTORE_COPIES = script(`
local n = #KEYS
local out = {}
for i = 1, n do
  if redis.call('set', KEYS[i], ARGV[i], 'NX', 'PX', ARGV[n + i]) then out[i] = 1 else out[i] = 0 end
end
return out
`);

/**
 * KEYS: fence bucket counter, legacy per-key counter, bucket-count key · ARGV: bucket count.
 * The fencing round's first step on one node: the bucket's next value (see `FENCE_LUA`).
 */
export const DRAW_FENCE = script(`${FENCE_LUA}
checkBuckets(KEYS[3], ARGV[1], true)
return drawFence(KEYS[1], KEYS[2])
`);

/**
 * KEYS: fence bucket counter, lock, bucket-count key · ARGV: fence, token, bucket count. The
 * fencing round's second step: raises this node's bucket to at least the grant's fence (never
 * lowers it), so the next grant's draw on any quorum exceeds it, and tags this node's copy of
 * the lock, if it is still ours, with the fence (`<token> <fence>`, keeping its expiry): what
 * `inspect` reports as the holder's fence.
 */
export const RAISE_FENCE = script(`${HOLDER_LUA}
${FENCE_LUA}
checkBuckets(KEYS[3], ARGV[3], true)
if (tonumber(redis.call('get', KEYS[1]) or '0') or 0) < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
if owns(redis.call('get', KEYS[2]), ARGV[2]) then
  local ttl = redis.call('pttl', KEYS[2])
  if ttl > 0 then redis.call('set', KEYS[2], ARGV[2] .. ' ' .. ARGV[1], 'PX', ttl) end
end
return 1
`);

/**
 * KEYS: lock, fence bucket counter, legacy per-key counter, bucket-count key · ARGV: bucket
 * count. This node's view of a key: `{lock value or '', PTTL, last fence}` (last fence: the
 * bucket counter, or the key's legacy counter if higher; 0 if never granted). Reads only.
 */
export const INSPECT_COPY = script(`${FENCE_LUA}
checkBuckets(KEYS[4], ARGV[1], false)
return {
  redis.call('get', KEYS[1]) or '',
  redis.call('pttl', KEYS[1]),
  lastFence(KEYS[2], KEYS[3])
}
`);

/** KEYS: lock · ARGV: none. Deletes this node's copy whoever holds it; returns its value or ''. */
export const DELETE_COPY = script(`
local current = redis.call('get', KEYS[1])
if current then redis.call('del', KEYS[1]) end
return current or ''
`);

/**
 * redlock's unlock script (given to it as `unlockScript`), comparing the token part: a copy
 * tagged `<token> <fence>` is still ours to release. KEYS: locks · ARGV: token. Returns how many
 * copies it deleted, as redlock's own does.
 */
export const REDLOCK_UNLOCK_LUA = `${HOLDER_LUA}
local count = 0
for _, key in ipairs(KEYS) do
  if owns(redis.call('get', key), ARGV[1]) then
    redis.call('del', key)
    count = count + 1
  end
end
return count
`;
