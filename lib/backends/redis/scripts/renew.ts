import { script } from '../port/redis-port';
import { VALUES_LUA } from './lua-base';

/**
 * Most leases one renewal script renews: a batch of thousands is cut into calls of this many
 * (sent together), so no single script keeps the server busy for long.
 */
export const RENEW_BATCH = 1_000;

/**
 * KEYS: n locks · ARGV: n tokens, then n ttls (ms), or one ttl for all (the common case: one ttl
 * per service). Renews each lease only if its own token still holds it: a mutex's string, or a
 * shared or counted holder's hash field (and the hash's expiry, to its latest holder's). Per key,
 * in order: 1 renewed, 0 not ours (expired, released, taken), or "FOREIGN <type>" when the key
 * holds something this module did not write (left as it is). One call renews a whole batch of
 * leases (on a Cluster, those of one slot).
 */
export const RENEW = script(`${VALUES_LUA}
local n = #KEYS
local one = #ARGV == n + 1
local renewed = {}
local now
for i = 1, n do
  local ttl = tonumber(one and ARGV[n + 1] or ARGV[n + i])
  local current = redis.pcall('get', KEYS[i])
  renewed[i] = 0
  if type(current) == 'string' then
    local holder = mutexValue(current)
    if not holder then
      renewed[i] = 'FOREIGN string'
    elseif holder == ARGV[i] then
      renewed[i] = redis.call('pexpire', KEYS[i], ttl)
    end
  elseif current ~= false then
    local kind = redis.call('type', KEYS[i]).ok
    local flat = kind == 'hash' and redis.call('hgetall', KEYS[i]) or {}
    local all = {}
    for j = 1, #flat, 2 do
      local mode, permits, slot, expiry, fence =
        string.match(flat[j + 1], '^([sx]) (%d+) (%d+) (%d+) (%d+)$')
      if mode then
        all[#all + 1] = { token = flat[j], head = mode .. ' ' .. permits .. ' ' .. slot,
                          expiry = tonumber(expiry), fence = fence }
      end
    end
    if kind ~= 'hash' or #all * 2 ~= #flat then
      renewed[i] = 'FOREIGN ' .. kind
    else
      if not now then
        local t = redis.call('time')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local latest = 0
      for _, h in ipairs(all) do
        if h.expiry <= now then
          redis.call('hdel', KEYS[i], h.token)
        else
          if h.token == ARGV[i] then
            h.expiry = now + ttl
            redis.call('hset', KEYS[i], h.token, h.head .. ' ' .. h.expiry .. ' ' .. h.fence)
            renewed[i] = 1
          end
          latest = math.max(latest, h.expiry)
        end
      end
      if latest > 0 then redis.call('pexpireat', KEYS[i], latest) end
    end
  end
end
return renewed
`);
