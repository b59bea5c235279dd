-- rate.lua, after ratelib.lua: store: redis rate cells stepped without a
-- lease (the arithmetic's own test, a tpm correction).
--
--   KEYS   the cells (take, adjust), or one cell and the marker of one
--          request's reconcile on it (reconcile)
--   ARGV   op, now, request id, unused, then 5 per cell: algorithm (1
--          gcra, 2 fixed_window, 3 sliding_window), cost (or signed
--          delta), amount, period (ns), burst (0: amount)
--
--   op "take"      evaluate the cells in order and stop at the first that
--                  refuses; one reply row per cell evaluated:
--                  {allowed, limit, remaining, retry_after_ns,
--                   reset_after_ns, unfittable}
--   op "adjust"    debit (delta > 0) or credit (delta < 0) every cell
--                  without an admission decision; replies the number of
--                  cells written
--   op "reconcile" adjust the one cell, once by request id: the marker
--                  (KEYS[2]) lives as long as the window corrected and a
--                  minute more; replies -1 when that request's reconcile
--                  of this cell was committed already

local op = ARGV[1]
local ncells = #KEYS
if op == 'reconcile' then
  local rid = ARGV[3]
  if type(rid) ~= 'string' or rid == '' or #KEYS ~= 2 then
    return redis.error_reply('tokentriage rate: a reconcile needs one cell, its marker and the request id that names it')
  end
  local ttl = math.floor((tonumber(ARGV[8]) or 0) / 1000000) + 60000
  if ttl > 34560000000 then ttl = 34560000000 end
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ttl) then
    return -1
  end
  op = 'adjust'
  ncells = 1
end
if op ~= 'take' and op ~= 'adjust' then
  return redis.error_reply('tokentriage rate: unknown op ' .. tostring(op))
end
local out = {}
local written = 0
for i = 1, ncells do
  local a = 4 + (i - 1) * 5
  local r, err = step(KEYS[i], op, tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  if r == nil then
    return redis.error_reply('tokentriage rate: key ' .. i .. ': ' .. err)
  end
  if op == 'take' then
    out[#out + 1] = r
    if r[1] == 0 then break end
  elseif r then
    written = written + 1
  end
end
if op == 'adjust' then return written end
return out
