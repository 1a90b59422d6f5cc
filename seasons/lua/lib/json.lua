-- json: JSON text written as Python's json.dumps(..., ensure_ascii=False, separators=(',', ':'))
-- writes it, so that what a script stores or answers is the text seasons/events.py measures
-- and the HTTP layer would write (cjson writes '/' as '\/', DEL as '\u007f' and numbers with
-- 14 digits).

local json_escapes = {
  ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
  ['\r'] = '\\r', ['\t'] = '\\t',
}
local JSON_SPECIAL = '[%z\1-\31"\\]'

local function json_escape(c)
  return json_escapes[c] or string.format('\\u%04x', c:byte())
end

local function json_string(text)
  if not string.find(text, JSON_SPECIAL) then return '"' .. text .. '"' end
  return '"' .. string.gsub(text, JSON_SPECIAL, json_escape) .. '"'
end

-- A number of a metadata object (json_flat), in the shortest form that reads back as the same
-- double (as %g writes it: 1e-05). Scores are written by json_score.
local function json_number(x)
  for p = 15, 17 do
    local s = string.format('%.' .. p .. 'g', x)
    if tonumber(s) == x then return s end
  end
end

-- A flat object (string, number and boolean values) with sorted keys; also its field count.
local function json_flat(obj)
  local names = {}
  for k in pairs(obj) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for i, k in ipairs(names) do
    local v = obj[k]
    local t = type(v)
    local enc
    if t == 'number' then enc = json_number(v)
    elseif t == 'boolean' then enc = v and 'true' or 'false'
    else enc = json_string(v) end
    parts[i] = json_string(k) .. ':' .. enc
  end
  return '{' .. table.concat(parts, ',') .. '}', #names
end

-- The smallest normal double: below it a double has fewer digits of precision, and its
-- shortest form may have fewer than 15 of them.
local DBL_MIN = 2.2250738585072014e-308

-- `digits` (a string of decimal digits) plus one in its last digit, and whether it carried
-- into one digit more (999 -> 1000, returned as 100 with the carry).
local function digits_up(digits)
  local i = #digits
  while i > 0 and string.byte(digits, i) == 57 do i = i - 1 end -- '9'
  if i == 0 then return '1' .. string.rep('0', #digits - 1), true end
  return string.sub(digits, 1, i - 1) .. (string.byte(digits, i) - 47)
    .. string.rep('0', #digits - i), false
end

-- A score (or a gap, a percentile) as JSON, the form declared by `Score` in
-- seasons/models.py: an integral value below 10^16 as the integer it is (637; 0 for -0),
-- any other in the shortest digits that read back as the same double (the nearest such
-- digits), in decimal notation from 10^-5 (637.5, 0.30000000000000004) and as d.ddde+x /
-- d.ddde-x outside it (1e+20, 1.5e-7). A decimal number of 15 significant digits or fewer
-- reads back as itself from a normal double (DBL_DIG), so the search for the shortest starts
-- at 15 digits; at each length the nearest decimal is tried, and for a power of two, whose
-- double below is nearer than the one above, also the decimal just above it.
local function json_score(x)
  if x == 0 then return '0' end
  local abs = x < 0 and -x or x
  -- Not JSON (and the search below would not end); no score Seasons writes comes near.
  if abs ~= abs or abs == math.huge then error('json_score: ' .. tostring(x) .. ' is not finite', 0) end
  if abs < 1e16 and x == math.floor(x) then return string.format('%.0f', x) end
  local sign = x < 0 and '-' or ''
  local power_of_two = math.frexp(abs) == 0.5
  local p, digits, exp = abs < DBL_MIN and 0 or 14
  while true do
    local s = string.format('%.' .. p .. 'e', abs)
    local first, rest, e = string.match(s, '^(%d)%.?(%d*)e([-+]%d+)$')
    digits, exp = first .. rest, tonumber(e)
    if tonumber(s) == abs then break end
    if power_of_two then
      local up, carried = digits_up(digits)
      local e_up = carried and exp + 1 or exp
      if tonumber(string.sub(up, 1, 1) .. '.' .. string.sub(up, 2) .. 'e' .. e_up) == abs then
        digits, exp = up, e_up
        break
      end
    end
    p = p + 1
  end
  digits = string.gsub(digits, '0+$', '')
  if exp >= -5 and exp < 16 then
    if exp < 0 then return sign .. '0.' .. string.rep('0', -exp - 1) .. digits end
    if exp + 1 >= #digits then return sign .. digits .. string.rep('0', exp + 1 - #digits) .. '.0' end
    return sign .. string.sub(digits, 1, exp + 1) .. '.' .. string.sub(digits, exp + 2)
  end
  local frac = string.sub(digits, 2)
  return sign .. string.sub(digits, 1, 1) .. (frac ~= '' and '.' .. frac or '') .. 'e'
    .. (exp > 0 and '+' or '-') .. (exp > 0 and exp or -exp)
end

-- Redis's text of a score as JSON (json_score): its plain digits when it is a non-negative
-- integer of up to 16 of them (the usual score, already in that form), else read and written.
local function score_json(text)
  if #text <= 16 and not string.find(text, '[^0-9]') then return text end
  return json_score(tonumber(text))
end

-- The composite layout of a board, from the argument a read script takes for it (built by
-- seasons/composite.py CompositeScore.script_layout): '' (none: nil) or
-- {"names": [...], "scales": [...], "max": n}, each part's name and multiplier, most
-- significant first, and the largest score that splits. Checked, as the script's `where`
-- (e.g. 'read_range.lua: ARGV[9]'): an error reply names what is wrong.
local function parts_layout(text, where)
  if text == nil or text == '' then return nil end
  local ok, layout = pcall(cjson.decode, text)
  local function bad(problem) error(where .. ' (composite layout): ' .. problem, 0) end
  if not ok or type(layout) ~= 'table' then bad('not a JSON object') end
  local names, scales, max = layout.names, layout.scales, layout.max
  if type(names) ~= 'table' or type(scales) ~= 'table' or #names == 0 or #names ~= #scales then
    bad('names and scales must be arrays of the same length, at least 1')
  end
  if type(max) ~= 'number' or max < 0 or max % 1 ~= 0 then bad('max must be an integer >= 0') end
  local keys = {}
  for i = 1, #names do
    if type(names[i]) ~= 'string' then bad('names[' .. i .. '] must be a string') end
    local scale = scales[i]
    if type(scale) ~= 'number' or scale < 1 or scale % 1 ~= 0 then
      bad('scales[' .. i .. '] must be an integer >= 1')
    end
    keys[i] = json_string(names[i]) .. ':'
  end
  return {keys = keys, scales = scales, max = max}
end

-- ',"parts":{...}' for a score (a number) on a board with a composite layout: each part's
-- value, most significant first; '' without a layout, or for a score that does not split
-- (not an integer in 0..max). Every score that splits is an integer below 2^53, so the
-- arithmetic is exact; the quotient is corrected where its division rounded up.
local function json_parts(layout, x)
  if layout == nil or x < 0 or x > layout.max or x ~= math.floor(x) then return '' end
  local scales, keys, floor = layout.scales, layout.keys, math.floor
  local out = ',"parts":{'
  for i = 1, #scales do
    local scale = scales[i]
    local v = floor(x / scale)
    if v * scale > x then v = v - 1 end
    x = x - v * scale
    -- Lua writes a number with 14 significant digits: exact below 10^14.
    out = out .. (i > 1 and ',' or '') .. keys[i] .. (v < 1e14 and v or string.format('%.0f', v))
  end
  return out .. '}'
end

-- An entry of a read's reply, {"rank","member","score","parts"?,"metadata"}: `score` is
-- Redis's text of the score, `metadata` the stored JSON text (nil: none), `layout` the
-- board's composite layout (nil: none). A chain of `..` is one concatenation in Lua, so each
-- entry is built once; a reply joins its entries once.
local function json_entry(rank, member, score, metadata, layout)
  local parts = layout and json_parts(layout, tonumber(score)) or ''
  if string.find(member, JSON_SPECIAL) then
    return '{"rank":' .. rank .. ',"member":' .. json_string(member) .. ',"score":'
      .. score_json(score) .. parts .. ',"metadata":' .. (metadata or '{}') .. '}'
  end
  return '{"rank":' .. rank .. ',"member":"' .. member .. '","score":' .. score_json(score)
    .. parts .. ',"metadata":' .. (metadata or '{}') .. '}'
end
