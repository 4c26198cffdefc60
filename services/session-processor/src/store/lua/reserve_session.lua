if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return -7 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return 1
