local function gate(session_key, lease_key, fence)
  if fence == '' then
    if redis.call('EXISTS', session_key) == 0 then return -2 end
    return 1
  end
  local v = redis.call('MGET', session_key, lease_key)
  if not v[1] then return -2 end
  if v[2] ~= fence then return -1 end
  return 1
end
