-- wrk script: a purchase (sale) on a saved card with a unique
-- Idempotency-Key per request. Set PM and KEY in the environment.
local pm = os.getenv("PM")
local key = os.getenv("KEY")
local counter = 0
local threads_started = 0

-- setup runs in the main Lua state; tid becomes a global of each thread's.
function setup(thread)
  thread:set("tid", threads_started)
  threads_started = threads_started + 1
end

request = function()
  counter = counter + 1
  local body = '{"amount":1999,"currency":"usd","payment_method":"' .. pm .. '","capture_method":"automatic"}'
  return wrk.format("POST", "/v1/payments", {
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = string.format("wrk-%d-%d-%d", tid, counter, os.time()),
  }, body)
end

local statuses = {}
local sample = nil
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status ~= 200 and sample == nil then sample = body; io.stderr:write("first non-200: " .. status .. " " .. body .. "\n") end
end

function done(summary, latency, requests)
  io.write(string.format("p50 %.2fms  p99 %.2fms  p99.9 %.2fms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000))
end
