if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
