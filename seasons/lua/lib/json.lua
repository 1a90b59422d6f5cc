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

-- The shortest form that reads back as the same double.
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

-- An entry of a read's reply, {"rank","member","score","metadata"}, appended to the buffer
-- `out` after its first `n` pieces; returns the new count. `score` is Redis's text of the
-- score, `metadata` the stored JSON text (nil: none). A reply is built as pieces joined
-- once: Lua interns every string, so joining with `..` would hash every partial result.
local function json_entry(out, n, rank, member, score, metadata)
  out[n + 1] = '{"rank":'
  out[n + 2] = rank
  if string.find(member, JSON_SPECIAL) then
    out[n + 3] = ',"member":'
    out[n + 4] = json_string(member)
    out[n + 5] = ',"score":'
  else
    out[n + 3] = ',"member":"'
    out[n + 4] = member
    out[n + 5] = '","score":'
  end
  out[n + 6] = score
  out[n + 7] = ',"metadata":'
  out[n + 8] = metadata or '{}'
  out[n + 9] = '}'
  return n + 9
end
