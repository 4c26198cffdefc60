local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
if ARGV[6] ~= '' then
  local head = redis.call('LINDEX', KEYS[7], 0)
  if not head or string.sub(head, 1, #ARGV[6]) ~= ARGV[6] then return -6 end
  redis.call('LPOP', KEYS[7])
  if ARGV[7] ~= '' then
    redis.call('HSET', KEYS[8], ARGV[7], ARGV[2])
    redis.call('PEXPIRE', KEYS[8], 86400000)
  end
end
if ARGV[4] ~= '1' then redis.call('ZADD', KEYS[3], 0, ARGV[2]) end
redis.call('SET', KEYS[4], ARGV[3])
if ARGV[5] ~= '' then redis.call('SET', KEYS[6], ARGV[5]) end
for i = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
end
return 1
