if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('LLEN', KEYS[2]) >= tonumber(ARGV[2]) then return -7 end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[3], '')
redis.call('PEXPIRE', KEYS[3], 86400000)
return 1
