-- check: the shape of a decoded JSON value, tested where the value is met: check(v, kind,
-- path) answers v when it is of that kind, else raises '<path>: must be <kind>, got <what v
-- is>' (error level 0: the text alone), which write.lua's pcall answers as its refusal
-- naming the field. Apart from the batch's own fields (lib/write_batch.lua) because it is how any
-- field is checked, not which fields there are. check_key also requires a key declared in
-- KEYS (a script touches no other).

--! include json

local null = cjson.null
local huge = math.huge
local declared = {}
for i = 1, #KEYS do declared[KEYS[i]] = true end

local function refuse(path, problem)
  error(path .. ': ' .. problem, 0)
end

local function describe(v)
  if v == nil then return 'nothing' end
  if v == null then return 'null' end
  if type(v) == 'string' then return 'the string ' .. json_string(v) end
  if type(v) == 'number' then return 'the number ' .. (json_number(v) or tostring(v)) end
  if type(v) == 'table' then return v[1] == nil and next(v) ~= nil and 'an object' or 'an array' end
  return 'a ' .. type(v)
end

local function finite(v)
  return type(v) == 'number' and v == v and v > -huge and v < huge
end

-- kind -> {what it is called, test}
local KINDS = {
  string = {'a string', function(v) return type(v) == 'string' end},
  number = {'a number', finite},
  integer = {'an integer', function(v) return finite(v) and v % 1 == 0 end},
  count = {'an integer >= 0', function(v) return finite(v) and v % 1 == 0 and v >= 0 end},
  boolean = {'true or false', function(v) return type(v) == 'boolean' end},
  -- cjson decodes arrays and objects alike, as tables: an array has no key but 1..n.
  array = {'an array', function(v)
    return type(v) == 'table' and (next(v) == nil or v[1] ~= nil)
  end},
  object = {'an object', function(v) return type(v) == 'table' and v[1] == nil end},
}

-- `v`, the value at `path`, which must be of `kind` (or null when `nullable`: then nil).
local function check(v, kind, path, nullable)
  if nullable and v == null then return nil end
  local k = KINDS[kind]
  if not k[2](v) then
    refuse(path, 'must be ' .. k[1] .. (nullable and ' or null' or '') .. ', got ' .. describe(v))
  end
  return v
end

local function check_key(v, path, nullable)
  if nullable and v == null then return nil end
  check(v, 'string', path, nullable)
  if not declared[v] then refuse(path, json_string(v) .. ' is not declared in KEYS') end
  return v
end

local function set(list)
  local out = {}
  for _, name in ipairs(list) do out[name] = true end
  return out
end

-- The fields of an object: `known` (a set) and no other.
local function only(obj, known, path)
  for name in pairs(obj) do
    if not known[name] then refuse(path .. tostring(name), 'unknown field') end
  end
end

local function one_of(v, choices, path)
  check(v, 'string', path)
  for _, c in ipairs(choices) do if v == c then return v end end
  refuse(path, 'must be ' .. table.concat(choices, ' or ') .. ', got ' .. describe(v))
end

