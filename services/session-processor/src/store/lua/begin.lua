-- A prompt's first write (begin.rs). KEYS: session, lease, fence, messages, msg, parts, prompt model, events, watched,
-- inputs. ARGV: owner, ttl ms, message id, message bytes, prompt model ('' none), inputs bytes ('' none), '1' to read
-- Redis's clock, the key stem of message heads, the key stem of parts hashes, '1' to check the record and prompt
-- model the caller validated the prompt against, that record, that prompt model, then (part id, part bytes)*.
-- The history's keys are the session's own (stem .. message id: same hash tag, so the same slot as KEYS).
local got = redis.call('MGET', KEYS[1], KEYS[2], KEYS[9], KEYS[7])
if not got[1] then return {-2} end
if got[2] then return {-1} end
if ARGV[10] == '1' and (got[1] ~= ARGV[11] or (got[4] or '') ~= ARGV[12]) then return {-5} end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
local earlier = redis.call('ZRANGE', KEYS[4], 0, -1)
redis.call('ZADD', KEYS[4], 0, ARGV[3])
redis.call('SET', KEYS[5], ARGV[4])
if ARGV[5] ~= '' and got[4] ~= ARGV[5] then redis.call('SET', KEYS[7], ARGV[5]) end
for i = 13, #ARGV, 1000 do
  redis.call('HSET', KEYS[6], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if ARGV[6] ~= '' then redis.call('SET', KEYS[10], ARGV[6]) end
local top = redis.call('XREVRANGE', KEYS[8], '+', '-', 'COUNT', 1)
local last = '0-0'
if top[1] then last = top[1][1] end
local secs, micros = -1, 0
if ARGV[7] == '1' then
  local t = redis.call('TIME')
  secs, micros = tonumber(t[1]), tonumber(t[2])
end
local watched = 0
if got[3] then watched = 1 end
local out = {token, last, secs, micros, watched}
local heads = {}
for i = 1, #earlier, 1000 do
  local names = {}
  for j = i, math.min(i + 999, #earlier) do names[#names + 1] = ARGV[8] .. earlier[j] end
  for _, head in ipairs(redis.call('MGET', unpack(names))) do heads[#heads + 1] = head end
end
for i, id in ipairs(earlier) do
  if heads[i] then
    out[#out + 1] = id
    out[#out + 1] = heads[i]
    out[#out + 1] = redis.call('HGETALL', ARGV[9] .. id)
  end
end
return out
