-- tokentriage's Lua library for the fleet's Redis: the arithmetic of
-- shared/rate for gcra, fixed_window and sliding_window, step for step, on
-- cells in the binary form of rate.State (AppendBinary, format 2), so the
-- fleet's cells decide exactly as a replica's shared-data cells do. Each
-- script the accountant runs (rate.lua, lease.lua) is this library followed
-- by its own main part, as one chunk.
--
-- Lua numbers are doubles, exact only below 2^53, and the algorithms need
-- 128-bit products of nanosecond instants, periods and amounts. So every
-- quantity that can grow past 2^53 is a bignum: an array of base-10^7 limbs,
-- least significant first, never negative (a limb product is below 10^14,
-- exact in a double). shared/rate saturates instead of wrapping; the few
-- saturations a reachable input can meet are applied where it applies them
-- (a quotient at 2^64-1, a result at 2^63-1).
--
-- ARGV[2] of every script is the instant of the call in unix nanoseconds,
-- or "" for the server's clock (TIME), the one clock every replica of a
-- fleet then shares. A written cell expires once it is drained (or its
-- windows are over) and one more period has passed, so idle counters do
-- not accumulate.

-- has passed, so idle counters do not accumulate.

local B = 10000000

local function norm(a)
  local n = #a
  while n > 1 and a[n] == 0 do
    a[n] = nil
    n = n - 1
  end
  return a
end

local function small(v)
  local a = {}
  repeat
    local q = math.floor(v / B)
    a[#a + 1] = v - q * B
    v = q
  until v == 0
  return a
end

local function parse(s)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') then return nil end
  local a = {}
  local i = #s
  while i >= 1 do
    local j = i - 6
    if j < 1 then j = 1 end
    local d = tonumber(string.sub(s, j, i))
    if d == nil then return nil end
    a[#a + 1] = d
    i = j - 1
  end
  if #a == 0 then return nil end
  return norm(a)
end

local function str(a)
  local parts = { string.format('%d', a[#a]) }
  for i = #a - 1, 1, -1 do
    parts[#parts + 1] = string.format('%07d', a[i])
  end
  return table.concat(parts)
end

local function cmp(a, b)
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then
      if a[i] < b[i] then return -1 end
      return 1
    end
  end
  return 0
end

local function iszero(a) return #a == 1 and a[1] == 0 end

local function add(a, b)
  local r, c = {}, 0
  local n = #a
  if #b > n then n = #b end
  for i = 1, n do
    local s = (a[i] or 0) + (b[i] or 0) + c
    if s >= B then
      r[i] = s - B
      c = 1
    else
      r[i] = s
      c = 0
    end
  end
  if c > 0 then r[n + 1] = c end
  return r
end

-- sub returns a - b, or 0 when b > a.
local function sub(a, b)
  if cmp(a, b) <= 0 then return { 0 } end
  local r, c = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - c
    if s < 0 then
      r[i] = s + B
      c = 1
    else
      r[i] = s
      c = 0
    end
  end
  return norm(r)
end

local function mul(a, b)
  local r = {}
  local na, nb = #a, #b
  for i = 1, na + nb do r[i] = 0 end
  for i = 1, na do
    local ai = a[i]
    if ai ~= 0 then
      local c = 0
      for j = 1, nb do
        local t = r[i + j - 1] + ai * b[j] + c
        c = math.floor(t / B)
        r[i + j - 1] = t - c * B
      end
      local k = i + nb
      while c > 0 do
        local t = r[k] + c
        c = math.floor(t / B)
        r[k] = t - c * B
        k = k + 1
      end
    end
  end
  return norm(r)
end

local function tofloat(a)
  local f = 0
  for i = #a, 1, -1 do f = f * B + a[i] end
  return f
end

-- divmod returns floor(a/b) and a mod b, for b > 0.
local function divmod(a, b)
  if cmp(a, b) < 0 then return { 0 }, a end
  if #b == 1 then
    local d, q, r = b[1], {}, 0
    for i = #a, 1, -1 do
      local t = r * B + a[i]
      local qi = math.floor(t / d)
      q[i] = qi
      r = t - qi * d
    end
    return norm(q), { r }
  end
  local q, r = {}, { 0 }
  local bf = tofloat(b)
  for i = #a, 1, -1 do
    table.insert(r, 1, a[i])
    r = norm(r)
    local qi = 0
    if cmp(r, b) >= 0 then
      qi = math.floor(tofloat(r) / bf)
      if qi >= B then qi = B - 1 end
      if qi < 1 then qi = 1 end
      local p = mul(b, small(qi))
      while cmp(p, r) > 0 do
        qi = qi - 1
        p = sub(p, b)
      end
      r = sub(r, p)
      while cmp(r, b) >= 0 do
        qi = qi + 1
        r = sub(r, b)
      end
    end
    q[i] = qi
  end
  return norm(q), r
end

local ZERO = { 0 }
local TWO32 = small(4294967296)
local MAXU64 = parse('18446744073709551615')
local MAXI64 = parse('9223372036854775807')
local MAXWINDOW = 65535

-- divmod64 is shared/rate's u128.divmod: a quotient of 2^64 or more
-- saturates at 2^64-1 with remainder 0.
local function divmod64(a, d)
  local q, r = divmod(a, d)
  if cmp(q, MAXU64) > 0 then return MAXU64, ZERO end
  return q, r
end

local function divceil64(a, d)
  local q, r = divmod64(a, d)
  if not iszero(r) and cmp(q, MAXU64) ~= 0 then q = add(q, { 1 }) end
  return q
end

local function clamp63(a)
  if cmp(a, MAXI64) > 0 then return MAXI64 end
  return a
end

local function minb(a, b)
  if cmp(a, b) <= 0 then return a end
  return b
end

-- Cells: rate.State format 2 (shared/rate/state.go).

local function getu32(s, i)
  local b1, b2, b3, b4 = string.byte(s, i, i + 3)
  return ((b1 * 256 + b2) * 256 + b3) * 256 + b4
end

local function getu64(s, i)
  return add(mul(small(getu32(s, i)), TWO32), small(getu32(s, i + 4)))
end

local function putu32(v)
  local b4 = v % 256
  v = (v - b4) / 256
  local b3 = v % 256
  v = (v - b3) / 256
  local b2 = v % 256
  v = (v - b2) / 256
  return string.char(v, b2, b3, b4)
end

local function putu64(a)
  local hi, lo = divmod(a, TWO32)
  return putu32(tofloat(hi)) .. putu32(tofloat(lo))
end

local function putu16(v)
  local lo = v % 256
  return string.char((v - lo) / 256, lo)
end

-- decode returns the cell of algorithm alg, or nil for a fresh one (absent,
-- another algorithm's, or not a format-2 encoding).
local function decode(raw, alg)
  if type(raw) ~= 'string' then return nil end
  local n = #raw
  local tag = string.byte(raw, 1)
  if alg == 1 and n == 25 and tag == 0x21 then
    -- shared/rate refuses a negative field (a top bit set) as unreadable
    if string.byte(raw, 10) >= 128 or string.byte(raw, 18) >= 128 then return nil end
    return { t = getu64(raw, 2), x = getu64(raw, 10), y = getu64(raw, 18) }
  elseif alg == 2 and n == 11 and tag == 0x22 then
    return { t = getu64(raw, 2), x = string.byte(raw, 10) * 256 + string.byte(raw, 11), y = 0 }
  elseif alg == 3 and n == 13 and tag == 0x23 then
    return { t = getu64(raw, 2), x = string.byte(raw, 10) * 256 + string.byte(raw, 11),
      y = string.byte(raw, 12) * 256 + string.byte(raw, 13) }
  end
  return nil
end

-- Params (shared/rate/params.go): nil when the limit has no capacity.
local function limits(alg, amount, period, burst)
  if iszero(amount) or iszero(period) then return nil end
  local l = { amount = amount, period = period }
  if alg == 1 then
    l.capacity = amount
    if not iszero(burst) then l.capacity = burst end
  else
    l.capacity = minb(amount, small(MAXWINDOW))
  end
  return l
end

-- gcra (shared/rate/gcra.go, level.go): the units in use times the period.

local function level_at(c, now, l)
  if c == nil then return ZERO end
  local frac = c.y
  if cmp(frac, l.period) >= 0 then frac = ZERO end
  local stored = add(mul(c.x, l.period), frac)
  if cmp(now, c.t) >= 0 then
    return sub(stored, mul(sub(now, c.t), l.amount))
  end
  return add(stored, mul(sub(c.t, now), l.amount))
end

local function level_wait(used, want, l)
  local room = mul(sub(l.capacity, want), l.period)
  if cmp(room, used) >= 0 then return ZERO end
  return divceil64(sub(used, room), l.amount)
end

local function level_result(used, l)
  local r = { 1, clamp63(l.capacity), ZERO, ZERO, ZERO, 0 }
  local cap = mul(l.capacity, l.period)
  if cmp(used, cap) < 0 then
    local q = divmod64(sub(cap, used), l.period)
    r[3] = clamp63(q)
  end
  r[5] = clamp63(level_wait(used, l.capacity, l))
  return r
end

local function level_state(used, at, l)
  local q, r = divmod64(used, l.period)
  if cmp(q, MAXI64) > 0 then
    q, r = MAXI64, ZERO
  end
  return string.char(0x21) .. putu64(at) .. putu64(q) .. putu64(r)
end

local function gcra_take(c, now, cost, l)
  local used = level_at(c, now, l)
  if iszero(cost) then return level_result(used, l), nil end
  if cmp(cost, l.capacity) > 0 then
    local r = level_result(used, l)
    r[1], r[6] = 0, 1
    return r, nil
  end
  local nxt = add(used, mul(cost, l.period))
  if cmp(mul(l.capacity, l.period), nxt) < 0 then
    local r = level_result(used, l)
    r[1] = 0
    r[4] = clamp63(level_wait(used, cost, l))
    return r, nil
  end
  local r = level_result(nxt, l)
  return r, level_state(nxt, now, l)
end

local function gcra_adjust(c, now, debit, mag, l)
  local used = level_at(c, now, l)
  if debit then
    used = add(used, mul(mag, l.period))
  else
    used = sub(used, mul(mag, l.period))
  end
  return level_state(used, now, l)
end

-- fixed_window and sliding_window (shared/rate/window.go,
-- fixed_window.go, sliding_window.go). Counts are at most 65,535, plain
-- numbers; instants and periods are bignums.

local function window_at(alg, c, now, l)
  local idx, el = divmod(now, l.period)
  local w = { index = idx, elapsed = el, cur = 0, prev = 0 }
  if c ~= nil then
    if cmp(c.t, idx) == 0 then
      w.cur, w.prev = c.x, c.y
    elseif cmp(add(c.t, { 1 }), idx) == 0 then
      w.prev = c.x
    end
  end
  if alg == 2 then w.prev = 0 end
  w.left = sub(l.period, el)
  return w
end

local function window_state(alg, w)
  local cur = math.min(w.cur, MAXWINDOW)
  if alg == 2 then
    return string.char(0x22) .. putu64(w.index) .. putu16(cur)
  end
  return string.char(0x23) .. putu64(w.index) .. putu16(cur) .. putu16(math.min(w.prev, MAXWINDOW))
end

local function remaining(counted, cap)
  if counted >= cap then return 0 end
  return cap - counted
end

local function fixed_result(w, cap)
  local r = { 1, small(cap), small(remaining(w.cur, cap)), ZERO, ZERO, 0 }
  if w.cur > 0 then r[5] = clamp63(w.left) end
  return r
end

local function fixed_take(c, now, cost, l)
  local w = window_at(2, c, now, l)
  local cap = tofloat(l.capacity)
  if iszero(cost) then return fixed_result(w, cap), nil end
  if cmp(cost, l.capacity) > 0 then
    local r = fixed_result(w, cap)
    r[1], r[6] = 0, 1
    return r, nil
  end
  local n = tofloat(cost)
  if w.cur + n > cap then
    local r = fixed_result(w, cap)
    r[1] = 0
    r[4] = clamp63(w.left)
    return r, nil
  end
  w.cur = w.cur + n
  return fixed_result(w, cap), window_state(2, w)
end

local function carried(w, l)
  if w.prev == 0 then return 0 end
  return tofloat(divceil64(mul(small(w.prev), w.left), l.period))
end

local function slide_wait(prev, room, l)
  if room >= prev then return ZERO end
  local q = divmod64(mul(small(room), l.period), small(prev))
  return sub(l.period, q)
end

local function sliding_result(w, cap, l)
  local r = { 1, small(cap), small(remaining(w.cur + carried(w, l), cap)), ZERO, ZERO, 0 }
  if w.cur > 0 then
    r[5] = clamp63(add(w.left, l.period))
  elseif w.prev > 0 then
    r[5] = clamp63(w.left)
  end
  return r
end

local function sliding_take(c, now, cost, l)
  local w = window_at(3, c, now, l)
  local cap = tofloat(l.capacity)
  if iszero(cost) then return sliding_result(w, cap, l), nil end
  if cmp(cost, l.capacity) > 0 then
    local r = sliding_result(w, cap, l)
    r[1], r[6] = 0, 1
    return r, nil
  end
  local n = tofloat(cost)
  if w.cur + carried(w, l) + n > cap then
    local r = sliding_result(w, cap, l)
    r[1] = 0
    if w.cur + n <= cap then
      r[4] = clamp63(sub(slide_wait(w.prev, cap - w.cur - n, l), w.elapsed))
    else
      r[4] = clamp63(add(w.left, slide_wait(w.cur, cap - n, l)))
    end
    return r, nil
  end
  w.cur = w.cur + n
  return sliding_result(w, cap, l), window_state(3, w)
end

local function window_adjust(alg, c, now, debit, mag, l)
  local w = window_at(alg, c, now, l)
  local m = tofloat(minb(mag, small(MAXWINDOW)))
  if debit then
    w.cur = math.min(w.cur + m, MAXWINDOW)
  elseif cmp(mag, small(w.cur)) <= 0 then
    w.cur = w.cur - m
  else
    local rest = tofloat(minb(sub(mag, small(w.cur)), small(MAXWINDOW)))
    w.cur = 0
    w.prev = w.prev - math.min(rest, w.prev)
  end
  return window_state(alg, w)
end

-- expiry: how long a written cell is worth keeping, in ms: until it is back
-- at full capacity, and one period more.
local function ttl_ms(reset_after, l)
  local ms = math.ceil(tofloat(add(reset_after, l.period)) / 1000000) + 1000
  if ms > 34560000000 then ms = 34560000000 end -- 400 days
  return ms
end

local function reset_of(alg, state, now, l)
  local c = decode(state, alg)
  if alg == 1 then
    return level_result(level_at(c, now, l), l)[5]
  elseif alg == 2 then
    return fixed_result(window_at(2, c, now, l), tofloat(l.capacity))[5]
  end
  return sliding_result(window_at(3, c, now, l), tofloat(l.capacity), l)[5]
end

-- The fast path. Most limits keep every quantity of a step below 2^51,
-- where doubles are exact: instants are kept as two 32-bit halves (their
-- difference is exact below 2^53), products are checked against 2^51
-- before they are used (a product of integers computed below 2^51 is
-- exact), and a quotient is corrected by its exact remainder. A step that
-- leaves that range (an amount past 2^50, a gcra cell pushed far past its
-- burst, windows longer than 2^36 ns) returns nil and runs on bignums above.

local F51 = 2251799813685248
local F52 = 4503599627370496
local W32 = 4294967296
local W16 = 65536

-- num reads a decimal below 10^15 as a double, else nil.
local function num(s)
  if #s > 15 then return nil end
  return tonumber(s)
end

-- fdivmod is exact floor division of integers a >= 0, b > 0 below 2^53.
local function fdivmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then
    q = q - 1
    r = r + b
  elseif r >= b then
    q = q + 1
    r = r - b
  end
  return q, r
end

local function fdivceil(a, b)
  local q, r = fdivmod(a, b)
  if r > 0 then q = q + 1 end
  return q
end

-- halves returns a decimal nanosecond instant, or seconds and
-- microseconds, as its high and low 32-bit halves.
local function halves(sec, ns)
  local a1, a0 = fdivmod(sec, W16)
  local x = a1 * 1000000000
  local hi, xl = fdivmod(x, W16)
  local lo = xl * W16 + a0 * 1000000000 + ns
  local carry
  carry, lo = fdivmod(lo, W32)
  return hi + carry, lo
end

local function put64(hi, lo) return putu32(hi) .. putu32(lo) end

local function fput(v)
  local hi, lo = fdivmod(v, W32)
  return putu32(hi) .. putu32(lo)
end

-- fwait is level_wait in doubles.
local function fwait(used, want, C, P, A)
  local room = (C - want) * P
  if room >= used then return 0 end
  return fdivceil(used - room, A)
end

local function fresult(used, C, P, A)
  local cap = C * P
  local rem = 0
  if used < cap then rem = fdivmod(cap - used, P) end
  return { 1, C, rem, 0, fwait(used, C, C, P, A), 0 }
end

-- flevel reads a gcra cell at now; nil when it leaves the exact range.
local function flevel(raw, nhi, nlo, C, P, A)
  if type(raw) ~= 'string' or #raw ~= 25 or string.byte(raw, 1) ~= 0x21 then return 0 end
  if string.byte(raw, 10) >= 128 or string.byte(raw, 18) >= 128 then return 0 end
  local xhi, yhi = getu32(raw, 10), getu32(raw, 18)
  if xhi >= 2097152 or yhi >= 2097152 then return nil end
  local x, y = xhi * W32 + getu32(raw, 14), yhi * W32 + getu32(raw, 22)
  if y >= P then y = 0 end
  local xp = x * P
  if xp >= F51 then return nil end
  local stored = xp + y
  if stored >= F51 then return nil end
  local dh = nhi - getu32(raw, 2)
  if dh >= 1048576 then return 0 end -- past 2^52 ns: drained
  if dh <= -1048576 then return nil end
  local e = dh * W32 + (nlo - getu32(raw, 6))
  if e >= 0 then
    local ea = e * A
    if ea >= F52 or ea >= stored then return 0 end
    return stored - ea
  end
  local ea = -e * A
  if ea >= F51 then return nil end
  local used = stored + ea
  if used >= F51 then return nil end
  return used
end

local function fgcra_take(raw, nhi, nlo, cost, C, P, A)
  if C * P >= F51 then return nil end
  local used = flevel(raw, nhi, nlo, C, P, A)
  if used == nil then return nil end
  if cost == 0 then return fresult(used, C, P, A), nil end
  if cost > C then
    local r = fresult(used, C, P, A)
    r[1], r[6] = 0, 1
    return r, nil
  end
  local nxt = used + cost * P
  if nxt > C * P then
    local r = fresult(used, C, P, A)
    r[1] = 0
    r[4] = fwait(used, cost, C, P, A)
    return r, nil
  end
  local q, rem = fdivmod(nxt, P)
  return fresult(nxt, C, P, A), string.char(0x21) .. put64(nhi, nlo) .. fput(q) .. fput(rem)
end

local function fgcra_adjust(raw, nhi, nlo, debit, mag, C, P, A)
  if C * P >= F51 then return nil end
  local used = flevel(raw, nhi, nlo, C, P, A)
  if used == nil then return nil end
  local mp = mag * P
  if debit then
    if mp >= F51 then return nil end
    used = used + mp
  elseif mp >= used then
    used = 0
  else
    used = used - mp
  end
  local q, rem = fdivmod(used, P)
  return string.char(0x21) .. put64(nhi, nlo) .. fput(q) .. fput(rem), fresult(used, C, P, A)[5]
end

-- fwindow rolls a window cell to now: the window index (as halves) and
-- the time into it, by long division of now in 16-bit digits (exact while
-- the period is below 2^36).
local function fwindow(alg, raw, nhi, nlo, P)
  local digits = { math.floor(nhi / W16), nhi % W16, math.floor(nlo / W16), nlo % W16 }
  local q, r = {}, 0
  for i = 1, 4 do
    local d
    d, r = fdivmod(r * W16 + digits[i], P)
    q[i] = d
  end
  local w = { ihi = q[1] * W16 + q[2], ilo = q[3] * W16 + q[4], elapsed = r, cur = 0, prev = 0 }
  w.left = P - r
  local size = 11
  if alg == 3 then size = 13 end
  if type(raw) == 'string' and #raw == size and string.byte(raw, 1) == 0x20 + alg then
    local thi, tlo = getu32(raw, 2), getu32(raw, 6)
    local x = string.byte(raw, 10) * 256 + string.byte(raw, 11)
    local y = 0
    if alg == 3 then y = string.byte(raw, 12) * 256 + string.byte(raw, 13) end
    local phi, plo = w.ihi, w.ilo - 1 -- the previous window's index
    if plo < 0 then phi, plo = phi - 1, W32 - 1 end
    if thi == w.ihi and tlo == w.ilo then
      w.cur, w.prev = x, y
    elseif thi == phi and tlo == plo then
      w.prev = x
    end
  end
  if alg == 2 then w.prev = 0 end
  return w
end

local function fwindow_state(alg, w)
  local s = string.char(0x20 + alg) .. put64(w.ihi, w.ilo) .. putu16(math.min(w.cur, MAXWINDOW))
  if alg == 3 then s = s .. putu16(math.min(w.prev, MAXWINDOW)) end
  return s
end

local function fcarried(w, P)
  if w.prev == 0 then return 0 end
  return fdivceil(w.prev * w.left, P)
end

local function fwresult(alg, w, cap, P)
  local counted = w.cur
  if alg == 3 then counted = counted + fcarried(w, P) end
  local r = { 1, cap, remaining(counted, cap), 0, 0, 0 }
  if alg == 2 then
    if w.cur > 0 then r[5] = w.left end
  elseif w.cur > 0 then
    r[5] = w.left + P
  elseif w.prev > 0 then
    r[5] = w.left
  end
  return r
end

local function fslide_wait(prev, room, P)
  if room >= prev then return 0 end
  return P - fdivmod(room * P, prev)
end

local function fwindow_take(alg, raw, nhi, nlo, cost, cap, P)
  local w = fwindow(alg, raw, nhi, nlo, P)
  if cost == 0 then return fwresult(alg, w, cap, P), nil end
  if cost > cap then
    local r = fwresult(alg, w, cap, P)
    r[1], r[6] = 0, 1
    return r, nil
  end
  local carry = 0
  if alg == 3 then carry = fcarried(w, P) end
  if w.cur + carry + cost > cap then
    local r = fwresult(alg, w, cap, P)
    r[1] = 0
    if alg == 2 then
      r[4] = w.left
    elseif w.cur + cost <= cap then
      r[4] = fslide_wait(w.prev, cap - w.cur - cost, P) - w.elapsed
    else
      r[4] = w.left + fslide_wait(w.cur, cap - cost, P)
    end
    return r, nil
  end
  w.cur = w.cur + cost
  return fwresult(alg, w, cap, P), fwindow_state(alg, w)
end

local function fwindow_adjust(alg, raw, nhi, nlo, debit, mag, cap, P)
  local w = fwindow(alg, raw, nhi, nlo, P)
  if debit then
    w.cur = math.min(w.cur + math.min(mag, MAXWINDOW), MAXWINDOW)
  elseif mag <= w.cur then
    w.cur = w.cur - mag
  else
    local rest = mag - w.cur
    w.cur = 0
    w.prev = w.prev - math.min(rest, w.prev)
  end
  return fwindow_state(alg, w), fwresult(alg, w, cap, P)[5]
end

local F36 = 68719476736

-- fast runs one step on doubles: the reply row (take) or the reset time
-- (adjust), and the cell to write; nil when the step is outside the exact
-- range.
local function fast(op, alg, raw, nhi, nlo, arg, amount, period, burst)
  local A, P, Bu = num(amount), num(period), num(burst)
  if A == nil or P == nil or Bu == nil or A == 0 or P == 0 then return nil end
  local C = A
  if alg == 1 then
    if Bu > 0 then C = Bu end
  else
    if P >= F36 then return nil end
    C = math.min(A, MAXWINDOW)
  end
  if op == 'take' then
    local cost = 0
    if string.sub(arg, 1, 1) ~= '-' then cost = num(arg) end
    if cost == nil then return nil end
    if alg == 1 then return fgcra_take(raw, nhi, nlo, cost, C, P, A) end
    return fwindow_take(alg, raw, nhi, nlo, cost, C, P)
  end
  local debit = string.sub(arg, 1, 1) ~= '-'
  local mag = num(debit and arg or string.sub(arg, 2))
  if mag == nil then return nil end
  if alg == 1 then return fgcra_adjust(raw, nhi, nlo, debit, mag, C, P, A) end
  return fwindow_adjust(alg, raw, nhi, nlo, debit, mag, C, P)
end

local function fttl(reset_after, P)
  local ms = math.ceil((reset_after + P) / 1000000) + 1000
  if ms > 34560000000 then ms = 34560000000 end
  return ms
end

-- The instant of the call, as two 32-bit halves (nhi, nlo); bignow() is it
-- as a bignum, made when a step needs the slow path.
local nhi, nlo
if ARGV[2] == '' then
  local t = redis.call('TIME')
  nhi, nlo = halves(tonumber(t[1]), tonumber(t[2]) * 1000)
else
  local s = ARGV[2]
  if type(s) ~= 'string' or not string.find(s, '^%d+$') or #s > 19 then
    return redis.error_reply('tokentriage: now is not a decimal number of nanoseconds')
  end
  local sec, ns = 0, tonumber(s)
  if #s > 9 then sec, ns = tonumber(string.sub(s, 1, #s - 9)), tonumber(string.sub(s, #s - 8)) end
  nhi, nlo = halves(sec, ns)
end
local bnow = nil
local function bignow()
  if bnow == nil then bnow = add(mul(small(nhi), TWO32), small(nlo)) end
  return bnow
end

-- now_ms is the instant in unix milliseconds.
local function now_ms()
  local q = divmod(bignow(), small(1000000))
  return tofloat(q)
end

local function digits(s) return type(s) == 'string' and string.find(s, '^%d+$') ~= nil end

-- step runs one algorithm step on the cell at key. op "take" asks for cost
-- arg and returns the reply row {allowed, limit, remaining,
-- retry_after_ns, reset_after_ns, unfittable} (numbers or decimal
-- strings); op "adjust" debits (arg > 0) or credits (arg < 0) without a
-- decision and returns true when it wrote the cell. A step writes the cell
-- only when it changes it. nil and a message for arguments that are not
-- an algorithm (1 gcra, 2 fixed_window, 3 sliding_window), a cost, an
-- amount, a period and a burst.
local function step(key, op, alg, arg, amount_s, period_s, burst_s)
  if alg == nil or alg < 1 or alg > 3 or not string.find(arg or '', '^%-?%d+$') or not digits(amount_s)
    or not digits(period_s) or not digits(burst_s) then
    return nil, 'arguments are not algorithm, cost, amount, period, burst'
  end
  local raw = redis.call('GET', key)
  if op == 'adjust' and string.find(arg, '^%-?0+$') then
    return false -- a zero correction changes nothing, as in shared/rate
  end
  local r, state = fast(op, alg, raw, nhi, nlo, arg, amount_s, period_s, burst_s)
  if op == 'take' then
    if r ~= nil then
      if state ~= nil then
        redis.call('SET', key, state, 'PX', fttl(r[5], tonumber(period_s)))
      end
      return r
    end
    local now = bignow()
    local l = limits(alg, parse(amount_s), parse(period_s), parse(burst_s))
    local c = decode(raw, alg)
    local cost = parse(arg)
    if cost == nil then cost = ZERO end -- a negative cost counts as 0
    if l == nil then
      r = { iszero(cost) and 1 or 0, ZERO, ZERO, ZERO, ZERO, iszero(cost) and 0 or 1 }
    elseif alg == 1 then
      r, state = gcra_take(c, now, cost, l)
    elseif alg == 2 then
      r, state = fixed_take(c, now, cost, l)
    else
      r, state = sliding_take(c, now, cost, l)
    end
    if state ~= nil then
      redis.call('SET', key, state, 'PX', ttl_ms(r[5], l))
    end
    return { r[1], str(r[2]), str(r[3]), str(r[4]), str(r[5]), r[6] }
  end
  if r ~= nil then
    -- fast answers the cell first and its reset time second
    redis.call('SET', key, r, 'PX', fttl(state, tonumber(period_s)))
    return true
  end
  local debit = string.sub(arg, 1, 1) ~= '-'
  local mag = parse(debit and arg or string.sub(arg, 2))
  local l = limits(alg, parse(amount_s), parse(period_s), parse(burst_s))
  if mag == nil or iszero(mag) or l == nil then return false end
  local now = bignow()
  local c = decode(raw, alg)
  if alg == 1 then
    state = gcra_adjust(c, now, debit, mag, l)
  else
    state = window_adjust(alg, c, now, debit, mag, l)
  end
  redis.call('SET', key, state, 'PX', ttl_ms(reset_of(alg, state, now, l), l))
  return true
end
