if redis.call('EXISTS', KEYS[1]) == 0 then return {-2, ''} end
local existing = redis.call('GET', KEYS[2])
if existing then return {0, existing} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], KEYS[2])
return {1, ''}
