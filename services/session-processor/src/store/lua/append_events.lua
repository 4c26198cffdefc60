if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return append(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
