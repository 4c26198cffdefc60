local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
if ARGV[4] ~= '1' then redis.call('ZADD', KEYS[3], 0, ARGV[2]) end
redis.call('SET', KEYS[4], ARGV[3])
if ARGV[5] ~= '' then redis.call('SET', KEYS[6], ARGV[5]) end
for i = 6, #ARGV, 2 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
end
return 1
