local t = redis.call('TIME')
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last = '0-0'
if top[1] then last = top[1][1] end
return {tonumber(t[1]), tonumber(t[2]), last}
