local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
local n = tonumber(ARGV[2])
for i = 1, n do
  if not redis.call('ZSCORE', KEYS[3], ARGV[2 + i]) then return -3 end
end
for i = 3 + n, #ARGV, 3 do
  redis.call('HSET', KEYS[3 + tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return 1
