-- lease.lua, after ratelib.lua: leases, the slices of a fleet limit that
-- a replica takes from Redis and decides on locally (RATIONALE.md, "How do
-- leases keep a fleet limit without a round trip per request?"). Redis
-- never leases more than it holds, so the fleet never admits more than
-- the amount. One key set per call, all in one hash slot.
--
-- op "rate"    KEYS[1] a rate cell (store: redis rpm or tpm).
--              ARGV: op, now, algorithm, amount, period (ns), burst, need,
--              extra, give back, anchor, hold (ms), replicas, ask id.
--              First the units given back of an earlier lot (its anchor
--              says which): a window's are taken off the window they were
--              counted in, if it is still the current one or, for
--              sliding_window, the previous one; gcra's less everything
--              that may have drained since the lot's instant. Then need is
--              taken by the algorithm's own step: all of it, or, refused,
--              the part that fits now (with the wait for all of it); when
--              all of need was taken, up to extra more, at most what is
--              left over twice the fleet's replicas, so that near its end
--              an amount goes to the replicas that need it, not to one
--              that asked ahead of need. Reply {allowed, granted, limit,
--              remaining, retry_after_ns, reset_after_ns, unfittable,
--              anchor, valid_ns}: the anchor names the lot (the window
--              index, or gcra's instant) and valid_ns how long it may be
--              drawn on (the rest of the window, or the hold).
-- op "restore" KEYS[1] a rate cell. ARGV: op, now, algorithm, amount,
--              period, burst, units, anchor. Counts again units a replica
--              holds of a lot taken before Redis lost its data: into the
--              lot's window while it is current (or the previous one), or
--              for gcra what of them has not drained since the anchor.
-- op "spend"   KEYS[1] the counter's fleet total (hash: accountant ->
--              its own total), KEYS[2] its leases (hash: g:R granted to
--              replica R and not given back, s:R what R's accountant
--              published of R's spend, h:R what R's calls in flight held
--              at its last renewal, t:R that renewal, unix ms).
--              ARGV: op, now, replica, amount, need (the call's dearest
--              cost), least (its cost lowered to one output token), extra,
--              give back, granted (the replica's own count of g:R), held,
--              free ms, hold ms, expiry (unix ms), replicas, ask id.
--              Spent is every accountant's total plus every replica's
--              lease not yet spent (g - s); a replica not renewed for free
--              ms keeps only what its calls in flight held, and after hold
--              ms nothing. The grant is need (and up to extra more, at
--              most what is left over twice the replicas) when it fits,
--              all that is left
--              when least fits, else nothing. Reply {allowed, granted,
--              spent before, of it held by calls in flight, left after}.
-- op "slots"   KEYS[1] a concurrency limit's slots (hash: n:R slots
--              replica R holds, t:R its last renewal, unix ms).
--              ARGV: op, now, replica, amount, need, extra, give back,
--              held (the replica's own count of n:R), ttl ms, replicas,
--              ask id.
--              A replica not renewed for ttl ms holds nothing. Reply
--              {allowed, granted, held by the others, held by this one}.
--
-- In "spend" and "slots" a replica whose fields are missing while it says
-- it holds something (Redis lost its data) is counted at what it says.
--
-- An operation that asks for something may carry an ask id (the last
-- ARGV) and, as its last key, the counter's record of grants: a grant is
-- recorded under its ask id for a couple of minutes, and the same ask again
-- (the replica did not hear the answer: a deadline passed on the way back)
-- gets the recorded answer instead of a second grant, so a grant is never
-- lost in transit nor made twice.

local op = ARGV[1]

-- recorded returns the answer recorded for this call's ask id, if any.
local function ask_id() return ARGV[#ARGV] end

local function recorded()
  local id = ask_id()
  if id == nil or id == '' or #KEYS < 2 then return nil end
  local v = redis.call('HGET', KEYS[#KEYS], id)
  if not v then return nil end
  local out = {}
  for f in string.gmatch(v, '[^,]+') do out[#out + 1] = f end
  for i = 1, #out do
    if string.find(out[i], '^%-?%d+$') and #out[i] < 16 then out[i] = tonumber(out[i]) end
  end
  return out
end

-- record keeps the answer r under this call's ask id, when it granted
-- something.
local function record(r)
  local id = ask_id()
  if type(r) ~= 'table' or r.err ~= nil or id == nil or id == '' or #KEYS < 2 or tostring(r[2]) == '0' then return r end
  local parts = {}
  for i = 1, #r do parts[i] = tostring(r[i]) end
  redis.call('HSET', KEYS[#KEYS], id, table.concat(parts, ','))
  redis.call('PEXPIRE', KEYS[#KEYS], 120000)
  return r
end

local function dec(x) return string.format('%.0f', x) end

local function big(s)
  local v = parse(s)
  if v == nil then return ZERO end
  return v
end

-- window_shift moves delta (a signed count) into or out of the window
-- anchor of the cell at key: the current window, or for sliding_window the
-- previous one; false when the anchor names neither.
local function window_shift(key, alg, amount_s, period_s, burst_s, anchor_s, delta)
  local l = limits(alg, parse(amount_s), parse(period_s), parse(burst_s))
  local k = parse(anchor_s)
  if l == nil or k == nil then return false end
  local now = bignow()
  local idx = divmod(now, l.period)
  local w = window_at(alg, decode(redis.call('GET', key), alg), now, l)
  if cmp(k, idx) == 0 then
    w.cur = math.max(math.min(w.cur + delta, MAXWINDOW), 0)
  elseif alg == 3 and cmp(add(k, { 1 }), idx) == 0 then
    w.prev = math.max(math.min(w.prev + delta, MAXWINDOW), 0)
  else
    return false
  end
  local state = window_state(alg, w)
  redis.call('SET', key, state, 'PX', ttl_ms(reset_of(alg, state, now, l), l))
  return true
end

-- gcra_shift moves into (debit) or out of the gcra cell at key n units
-- counted at the instant anchor, less what of them has drained since (at
-- least 0), exactly: in the cell's own precision (units times the period).
local function gcra_shift(key, amount_s, period_s, burst_s, n, anchor_s, debit)
  local l = limits(1, parse(amount_s), parse(period_s), parse(burst_s))
  local a = parse(anchor_s)
  if l == nil or a == nil then return false end
  local now = bignow()
  local left = sub(mul(small(n), l.period), mul(sub(now, a), l.amount))
  if iszero(left) then return false end
  local used = level_at(decode(redis.call('GET', key), 1), now, l)
  if debit then used = add(used, left) else used = sub(used, left) end
  redis.call('SET', key, level_state(used, now, l), 'PX', ttl_ms(level_result(used, l)[5], l))
  return true
end

local function lease_rate(key)
  local alg = tonumber(ARGV[3])
  local amount_s, period_s, burst_s = ARGV[4], ARGV[5], ARGV[6]
  local need, extra, back = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local anchor, hold_ms, reps = ARGV[10], tonumber(ARGV[11]), math.max(tonumber(ARGV[12]) or 1, 1)
  if need == nil or extra == nil or back == nil or hold_ms == nil or need < 0 or extra < 0 or back < 0 then
    return redis.error_reply('tokentriage lease: need, extra, give back and hold are not whole numbers')
  end
  local probe, err = step(key, 'take', alg, '0', amount_s, period_s, burst_s)
  if probe == nil then return redis.error_reply('tokentriage lease: ' .. err) end
  if back > 0 and digits(anchor) then
    if alg == 1 then
      gcra_shift(key, amount_s, period_s, burst_s, back, anchor, false)
    else
      window_shift(key, alg, amount_s, period_s, burst_s, anchor, -back)
    end
  end
  local r = step(key, 'take', alg, '0', amount_s, period_s, burst_s)
  local allowed, granted, wait, unfit = 1, 0, '0', 0
  if need > 0 then
    local rn = step(key, 'take', alg, dec(need), amount_s, period_s, burst_s)
    if rn[1] == 1 then
      granted, r = need, rn
    else
      allowed, wait, unfit = 0, rn[4], rn[6]
      local part = math.min(need - 1, tonumber(rn[3]) or 0)
      if part > 0 then
        local rp = step(key, 'take', alg, dec(part), amount_s, period_s, burst_s)
        if rp[1] == 1 then granted, r = part, rp end
      end
    end
  end
  if allowed == 1 and extra > 0 then
    local e = math.min(extra, math.floor((tonumber(r[3]) or 0) / (2 * reps)))
    if e > 0 then
      local re = step(key, 'take', alg, dec(e), amount_s, period_s, burst_s)
      if re[1] == 1 then granted, r = granted + e, re end
    end
  end
  local anchor_out, valid
  if alg == 1 then
    anchor_out, valid = str(bignow()), dec(hold_ms * 1000000)
  else
    local p = parse(period_s)
    local idx, el = divmod(bignow(), p)
    anchor_out, valid = str(idx), str(clamp63(sub(p, el)))
  end
  return { allowed, dec(granted), tostring(r[2]), tostring(r[3]), tostring(wait), tostring(r[5]), unfit, anchor_out, valid }
end

local function lease_restore(key)
  local alg = tonumber(ARGV[3])
  local amount_s, period_s, burst_s, units_s, anchor = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
  if not digits(units_s) or not digits(anchor) or alg == nil or alg < 1 or alg > 3 then
    return redis.error_reply('tokentriage lease: restore needs an algorithm, units and an anchor')
  end
  if alg == 1 then
    if gcra_shift(key, amount_s, period_s, burst_s, tonumber(units_s) or 0, anchor, true) then return 1 end
    return 0
  end
  if window_shift(key, alg, amount_s, period_s, burst_s, anchor, tonumber(units_s) or 0) then return 1 end
  return 0
end

-- replicas reads a lease hash into per-replica records.
local function replicas(L)
  local f = redis.call('HGETALL', L)
  local reps = {}
  for i = 1, #f, 2 do
    local kind, rep = string.match(f[i], '^(%a):(.+)$')
    if kind ~= nil then
      if reps[rep] == nil then reps[rep] = {} end
      reps[rep][kind] = f[i + 1]
    end
  end
  return reps
end

local function lease_spend(T, L)
  local rep, amount = ARGV[3], parse(ARGV[4])
  local need, least, extra, back = parse(ARGV[5]), parse(ARGV[6]), parse(ARGV[7]), parse(ARGV[8])
  local granted_own, held = parse(ARGV[9]), parse(ARGV[10])
  local free_ms, hold_ms, exp = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13]
  local reps = math.max(tonumber(ARGV[14]) or 1, 1)
  if rep == nil or rep == '' or amount == nil or need == nil or least == nil or extra == nil or back == nil
    or granted_own == nil or held == nil or free_ms == nil or hold_ms == nil or not digits(exp) then
    return redis.error_reply('tokentriage lease: spend needs a replica and decimal amounts')
  end
  local nowms = now_ms()
  local g = parse(redis.call('HGET', L, 'g:' .. rep) or '')
  if g == nil then g = granted_own end -- Redis lost it: the replica's own count
  g = sub(g, back)
  redis.call('HSET', L, 'g:' .. rep, str(g), 'h:' .. rep, str(held), 't:' .. rep, dec(nowms))
  local spent, inflight = ZERO, ZERO
  for _, v in ipairs(redis.call('HVALS', T)) do
    local x = parse(v)
    if x ~= nil then spent = add(spent, x) end
  end
  for r, x in pairs(replicas(L)) do
    local age = nowms - (tonumber(x.t or '0') or 0)
    local out = sub(big(x.g), big(x.s))
    local h = minb(big(x.h), out)
    if age > hold_ms then
      redis.call('HDEL', L, 'g:' .. r, 'h:' .. r, 't:' .. r)
      out, h = ZERO, ZERO
    elseif age > free_ms then
      out = h
    end
    spent = add(spent, out)
    inflight = add(inflight, h)
  end
  local allowed, grant = 1, ZERO
  local room = sub(amount, spent)
  if not iszero(need) or not iszero(least) then
    if cmp(need, room) <= 0 then
      local rest = sub(room, need)
      grant = add(need, minb(extra, divmod(rest, small(2 * reps))))
    elseif cmp(least, room) <= 0 and not iszero(room) then
      allowed, grant = 0, room
    else
      allowed = 0
    end
  end
  if not iszero(grant) then
    redis.call('HSET', L, 'g:' .. rep, str(add(g, grant)))
  end
  redis.call('PEXPIREAT', L, exp)
  return { allowed, str(grant), str(spent), str(inflight), str(sub(room, grant)) }
end

local function lease_slots(S)
  local rep, amount = ARGV[3], tonumber(ARGV[4])
  local need, extra, back, held, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local reps = math.max(tonumber(ARGV[10]) or 1, 1)
  if rep == nil or rep == '' or amount == nil or need == nil or extra == nil or back == nil or held == nil or ttl == nil then
    return redis.error_reply('tokentriage lease: slots needs a replica and whole numbers')
  end
  local nowms = now_ms()
  local others, mine = 0, nil
  for r, x in pairs(replicas(S)) do
    local n = tonumber(x.n or '0') or 0
    if nowms - (tonumber(x.t or '0') or 0) > ttl then
      redis.call('HDEL', S, 'n:' .. r, 't:' .. r)
    elseif r == rep then
      mine = n
    else
      others = others + n
    end
  end
  if mine == nil then mine = held end -- lapsed or lost: what the replica says it holds
  mine = math.max(mine - back, 0)
  local allowed, grant = 1, 0
  if need > 0 then
    local room = math.max(amount - others - mine, 0)
    if need <= room then
      grant = need + math.min(extra, math.floor((room - need) / (2 * reps)))
    else
      allowed, grant = 0, room
    end
  end
  mine = mine + grant
  redis.call('HSET', S, 'n:' .. rep, dec(mine), 't:' .. rep, dec(nowms))
  redis.call('PEXPIRE', S, ttl * 4)
  return { allowed, grant, others, mine }
end

if op == 'restore' then return lease_restore(KEYS[1]) end
local again = recorded()
if again ~= nil then return again end
if op == 'rate' then return record(lease_rate(KEYS[1])) end
if op == 'spend' then return record(lease_spend(KEYS[1], KEYS[2])) end
if op == 'slots' then return record(lease_slots(KEYS[1])) end
return redis.error_reply('tokentriage lease: unknown op ' .. tostring(op))
