import { script } from '../redis/port/redis-port';
import { FENCES_LUA } from '../redis/scripts/lua-base';

// Scripts run on each independent node of a Redlock set. A copy's value is `<token>` from the
// lock round, then `<token> <fence>` once the fencing round tagged it; every comparison is on the
// token part. A key holding anything else was not written by this module: it is refused
// ("FOREIGN <type>"), never changed.

/**
 * Lua on copies. `copyOf(v)`: the token (at least 16 characters, no space) and fence (nil while
 * untagged) of a copy's value, or nil when `v` is not one. `checkedCopy(key)`: the key's copy
 * (`false` when absent), refusing a key that holds anything else.
 */
const COPY_LUA = `
local function foreign(kind) error({err = 'FOREIGN ' .. kind}) end
local function copyOf(v)
  local token, fence = string.match(v, '^(%S+) ?(%d*)$')
  if token and #token >= 16 then return token, tonumber(fence) end
  return nil
end
local function checkedCopy(key)
  local v = redis.pcall('get', key)
  if type(v) == 'table' then foreign(redis.call('type', key).ok) end
  if v and not copyOf(v) then foreign('string') end
  return v
end
`;

/**
 * KEYS: lock, fence bucket counter · ARGV: token, ttl ms. The lock round on one node: `SET NX
 * PX` of the bare token and, when it took, the bucket's next fence (the fencing round's draw, in
 * the same round trip): `{1, draw}`, else `{0, 0}`.
 */
export const LOCK = script(`${COPY_LUA}${FENCES_LUA}
if checkedCopy(KEYS[1]) then return {0, 0} end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, drawFence(KEYS[2])}
`);

/**
 * KEYS: fence bucket counter, lock · ARGV: fence, token. The fencing round on one node: raises the bucket to at least the grant's fence (never lowers it),
 * so the next grant's draw on any quorum exceeds it, and tags this node's copy of the lock, if it
 * is still ours, with the fence (`<token> <fence>`, keeping its expiry): what `inspect` reports.
 */
export const RAISE_FENCE = script(`${COPY_LUA}${FENCES_LUA}
if lastFence(KEYS[1]) < tonumber(ARGV[1]) then redis.call('set', KEYS[1], ARGV[1]) end
local v = checkedCopy(KEYS[2])
if v and copyOf(v) == ARGV[2] then
  local ttl = redis.call('pttl', KEYS[2])
  if ttl > 0 then redis.call('set', KEYS[2], ARGV[2] .. ' ' .. ARGV[1], 'PX', ttl) end
end
return 1
`);

/** KEYS: lock · ARGV: token. Deletes this node's copy if it is ours: 1, else 0. */
export const UNLOCK = script(`${COPY_LUA}
local v = checkedCopy(KEYS[1])
if v and copyOf(v) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
`);

/**
 * KEYS: n locks · ARGV: n tokens, then n ttls (ms). Renews this node's copies of our locks: per
 * key two entries, `1, <value>` renewed (the value, to put missing copies back with), `0, ''` no
 * copy here (the node restarted empty, or the copy expired), `-1, ''` someone else's, or
 * something this module did not write (left as it is). A missing copy is not created here: only
 * once a quorum renewed (see {@link RESTORE_COPIES}), or a lock freed on every node
 * (`forceRelease`) would come back.
 */
export const RENEW_COPIES = script(`${COPY_LUA}
local n = #KEYS
local out = {}
for i = 1, n do
  local ok, v = pcall(checkedCopy, KEYS[i])
  if not ok then
    out[2 * i - 1], out[2 * i] = -1, ''
  elseif v and copyOf(v) == ARGV[i] then
    redis.call('pexpire', KEYS[i], ARGV[n + i])
    out[2 * i - 1], out[2 * i] = 1, v
  elseif not v then
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
 * KEYS: lock, fence bucket counter. This node's view of a key: `{copy or '', PTTL, last fence}`
 * (last fence: the bucket counter; 0 if never granted). Reads only.
 */
export const INSPECT_COPY = script(`${COPY_LUA}${FENCES_LUA}
return { checkedCopy(KEYS[1]) or '', redis.call('pttl', KEYS[1]), lastFence(KEYS[2]) }
`);

/** KEYS: lock. Deletes this node's copy whoever holds it; returns its value or ''. */
export const DELETE_COPY = script(`${COPY_LUA}
local v = checkedCopy(KEYS[1])
if v then redis.call('del', KEYS[1]) end
return v or ''
`);
