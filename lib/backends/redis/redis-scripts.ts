import { createHash } from 'node:crypto';

/** A Lua script with its SHA1, for EVALSHA with an EVAL fallback. */
export interface RedisScript {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): RedisScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

// Keys and tokens reach the scripts only as KEYS/ARGV, never spliced into the text, so no key
// content can change what runs.

/**
 * KEYS: lock, fence · ARGV: token, ttl ms. Takes the lock and bumps the fence in one atomic
 * step: `{1, fence}` when granted, `{0, pttl}` (holder's remaining lease) when busy.
 */
export const ACQUIRE = script(`
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
`);

/** KEYS: lock · ARGV: token, ttl ms. Renews only our own lock: 1, else 0. */
export const EXTEND = script(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
`);

/**
 * KEYS: lock · ARGV: token, channel. Deletes only our own lock and wakes the waiters on the
 * key's channel: 1, else 0 (expired, or someone else's).
 */
export const RELEASE = script(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], '1')
  return 1
end
return 0
`);

/**
 * KEYS: fence · ARGV: value. Raises a node's fence counter to at least `value` (never lowers
 * it): Redlock's second fencing round, so the next grant's INCR on any quorum exceeds it.
 */
export const RAISE_FENCE = script(`
local current = tonumber(redis.call('get', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
return 1
`);
