local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
redis.call('SET', KEYS[1], ARGV[2])
return 1
