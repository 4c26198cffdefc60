local function append(events, cap, id, batch)
  local written = redis.pcall('XADD', events, 'MAXLEN', '~', cap, id, 'b', batch)
  if type(written) == 'string' then return written end
  local top = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if top[1] and top[1][1] == id then return id end
  return redis.call('XADD', events, 'MAXLEN', '~', cap, '*', 'b', batch)
end
