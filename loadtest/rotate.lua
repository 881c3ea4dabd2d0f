-- wrk script (GET of the URL's path): every request carries another Authorization token and X-Forwarded-For
-- client IP (from 198.18.0.0/15, the benchmarking range), from a ring of requests
-- formatted once per thread. Counts responses by status and prints them, with the
-- summary and latency percentiles, as one line "BENCH_JSON {...}" at the end.
-- Arguments after "--": <file with one token a line> [<number of client IPs>]

local next_id = 1
local threads = {}

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local ring = {}
local ring_size = 0
local at = 0
statuses = {}

function init(args)
  local tokens = {}
  for line in io.lines(args[1]) do
    if #line > 0 then tokens[#tokens + 1] = line end
  end
  if #tokens == 0 then error("no tokens in " .. tostring(args[1])) end
  local ips = tonumber(args[2] or "4096")
  local me = id or 1
  ring_size = 8192
  for k = 0, ring_size - 1 do
    local token = tokens[((k + me * 977) % #tokens) + 1]
    local n = (k * 7 + me * 131) % ips
    local ip = string.format("198.%d.%d.%d", 18 + math.floor(n / 65536) % 2, math.floor(n / 256) % 256, n % 256)
    ring[k + 1] = wrk.format("GET", wrk.path, { ["Authorization"] = "Bearer " .. token, ["X-Forwarded-For"] = ip })
  end
end

function request()
  at = at % ring_size + 1
  return ring[at]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + n
    end
  end
  local parts = {}
  for status, n in pairs(total) do parts[#parts + 1] = string.format('"%d":%d', status, n) end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"statuses":{%s},"latency_us":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    table.concat(parts, ","), latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
