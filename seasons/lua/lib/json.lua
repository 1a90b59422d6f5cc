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
-- double (as %g writes it: 1e-05).
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
