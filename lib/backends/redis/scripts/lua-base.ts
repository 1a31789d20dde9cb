// Lua every Redis-family script starts from. Keys and tokens reach the scripts only as KEYS and
// ARGV, never spliced into the text, so no key content can change what runs. Scripts call no
// `redis.replicate_commands()`: Redis 5 and later replicate a script's effects, not the script.

/**
 * Lua on lock values, needing no KEYS.
 * - `foreign(kind)`: refuses to go on (error "FOREIGN <kind>") because the key holds something
 *   this module did not write; nothing of it is changed.
 * - `mutexValue(v)`: the owner token and fence of a mutex's value `<token> <fence>` (a token of
 *   at least 16 characters without a space), or nil when `v` is no such value. A value ending in
 *   ` q` (`<token> <fence> q`) is a mutex someone queued for: its release must hand it on.
 */
export const VALUES_LUA = `
local function foreign(kind) error({err = 'FOREIGN ' .. kind}) end
local function mutexValue(v)
  local token, fence, rest = string.match(v, '^(%S+) (%d+)(.*)$')
  if token and #token >= 16 and (rest == '' or rest == ' q') then return token, tonumber(fence) end
  return nil
end
`;

/**
 * Lua on fence bucket counters (see `fence-buckets.ts`).
 * - `drawFence(counter)`: the bucket's next fence, and its digits: the server's time in
 *   microseconds (its two parts joined as text: no float formatting), or the counter plus one when
 *   that is higher (two calls: the time, and a `SET ... GET` of the counter, which a counter ahead
 *   of the clock corrects). Every key always draws from one counter, which only rises, so a key's
 *   fences rise strictly whatever the clock does. Following the clock makes them rise across
 *   counters too: a counter lost in a restart without data, or a key moved to another bucket by a
 *   change of `fenceBuckets`, starts above every fence drawn before it (no node runs two grants in
 *   one microsecond), as long as the server's clock does not step back.
 * - `lastFence(counter)`: the bucket's counter, at least the last fence any key of the bucket
 *   was granted (0 when none was).
 * - `digits(n)`: a fence (up to 16 digits) as text; Lua's own conversion would round it.
 */
export const FENCES_LUA = `
local function digits(n)
  return string.format('%.0f', n)
end
local function drawFence(counter)
  local t = redis.call('time')
  local text = t[1] .. string.sub(t[2] + 1000000, 2)
  local fence = tonumber(text)
  local before = redis.call('set', counter, text, 'GET')
  if before then
    local last = tonumber(before)
    if not last then
      redis.call('set', counter, before)
      error({err = 'FOREIGN string at ' .. counter})
    end
    if last >= fence then
      fence = last + 1
      text = digits(fence)
      redis.call('set', counter, text)
    end
  end
  return fence, text
end
local function lastFence(counter)
  return tonumber(redis.call('get', counter) or '0') or 0
end
`;

/** `serverNow()`: the server's clock in ms, so that no client's clock matters. */
export const TIME_LUA = `
local function serverNow()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;
