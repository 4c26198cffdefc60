if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
if redis.call('SISMEMBER', KEYS[5], ARGV[3]) == 0 then return -3 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], KEYS[3])
return 1
