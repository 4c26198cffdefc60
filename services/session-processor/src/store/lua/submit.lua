if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], KEYS[3])
return 1
