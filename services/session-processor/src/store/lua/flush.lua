local got = redis.call('MGET', KEYS[2], KEYS[3], KEYS[1])
local owned = ARGV[4] ~= '' and got[1] == ARGV[4]
if not owned and not got[3] then return false end
local watched = 0
if got[2] then watched = 1 end
-- A run's end that released the lease, sent again because its reply was lost: the entry with its exact id is there
-- (a successor's ids all come after it), so this write already happened, whole.
if ARGV[9] == '2' and not owned and ARGV[3] ~= '' and redis.call('XRANGE', KEYS[4], ARGV[2], ARGV[2])[1] then
  local session = 0
  if ARGV[6] == '1' then session = 1 end
  return {ARGV[2], watched, 1, 0, session, 1}
end
local renewed = 0
if owned and ARGV[5] ~= '' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  renewed = 1
end
local session = 0
if ARGV[6] == '1' then
  if not owned then
    session = -1
  elseif got[3] ~= ARGV[7] then
    session = -4
  else
    redis.call('SET', KEYS[1], ARGV[8])
    session = 1
  end
end
local n = tonumber(ARGV[10])
local status = 1
-- A run's end from a loop whose lease moved on is not logged.
local stale_end = ARGV[9] ~= '' and ARGV[4] ~= '' and not owned
if stale_end then status = -1 end
if n > 0 then
  if not owned then
    status = -1
  else
    local i = 11
    for m = 1, n do
      if ARGV[i + 1] == '1' and ARGV[i + 2] == '' and not redis.call('ZSCORE', KEYS[5], ARGV[i]) then
        status = -3
      end
      i = i + 4 + 2 * tonumber(ARGV[i + 3])
    end
    if status == 1 then
      i = 11
      for m = 1, n do
        local k = tonumber(ARGV[i + 3])
        if ARGV[i + 2] ~= '' then
          if ARGV[i + 1] == '1' then redis.call('ZADD', KEYS[5], 0, ARGV[i]) end
          redis.call('SET', KEYS[4 + 2 * m], ARGV[i + 2])
        end
        if k > 0 then redis.call('HSET', KEYS[5 + 2 * m], unpack(ARGV, i + 4, i + 3 + 2 * k)) end
        i = i + 4 + 2 * k
      end
    end
  end
end
local entry = ''
if ARGV[3] ~= '' and not stale_end then entry = append(KEYS[4], ARGV[1], ARGV[2], ARGV[3]) end
-- The run's end, logged with everything before it, releases the lease when no prompt waits (the last key is the
-- queue) and nothing still needs the lease (parts written, the record's totals not in conflict).
local released = 0
if ARGV[9] == '2' and owned and entry ~= '' and status == 1 and session >= 0
    and redis.call('LLEN', KEYS[#KEYS]) == 0 then
  redis.call('DEL', KEYS[2])
  released = 1
end
return {entry, watched, status, renewed, session, released}
