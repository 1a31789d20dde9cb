import { script } from '../port/redis-port';

/**
 * KEYS: bucket-count key · ARGV: bucket count wanted. The node's bucket count, recording the
 * wanted one first if the node has none (a fresh node, or one restarted empty).
 */
export const READ_BUCKETS = script(`
local have = redis.call('get', KEYS[1])
if have then return tonumber(have) end
redis.call('set', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
`);

/**
 * KEYS: bucket-count key, the old count's counters, the new count's counters · ARGV: old
 * count, new count. Moves a node to another bucket count in one atomic step: raises every new
 * counter to the largest old one (a key's new bucket then starts above every fence the key
 * had), deletes the old counters that are not new ones, records the new count. Refuses
 * ("FENCEBUCKETS <n>") if the node's count is no longer the old one (another instance moved it
 * meanwhile). Returns the largest old counter.
 */
export const MIGRATE_BUCKETS = script(`
local old, new = tonumber(ARGV[1]), tonumber(ARGV[2])
local have = redis.call('get', KEYS[1])
if have ~= ARGV[1] then error({err = 'FENCEBUCKETS ' .. (have or '0')}) end
local max, keep = 0, {}
for i = 2, old + 1 do max = math.max(max, tonumber(redis.call('get', KEYS[i]) or '0') or 0) end
for i = old + 2, old + new + 1 do
  keep[KEYS[i]] = true
  if (tonumber(redis.call('get', KEYS[i]) or '0') or 0) < max then redis.call('set', KEYS[i], max) end
end
for i = 2, old + 1 do
  if not keep[KEYS[i]] then redis.call('del', KEYS[i]) end
end
redis.call('set', KEYS[1], ARGV[2])
return max
`);
