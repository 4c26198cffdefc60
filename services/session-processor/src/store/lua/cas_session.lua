local v = redis.call('MGET', KEYS[1], KEYS[2])
if not v[1] then return -2 end
if ARGV[1] ~= '' and v[2] ~= ARGV[1] then return -1 end
if v[1] ~= ARGV[2] then return -4 end
redis.call('SET', KEYS[1], ARGV[3])
return 1
