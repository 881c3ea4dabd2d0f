-- What every wrk script of the benches shares (wrk.ts puts it before the script): the threads
-- kept for done(), responses counted by status, a client IP from 198.18.0.0/15 (the
-- benchmarking range), and the one line "BENCH_JSON {...}" that wrk.ts reads.

local next_id = 1
local threads = {}
statuses = {}

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

-- The client IP of request k of thread `me`, one of `ips` addresses.
function client_ip(k, me, ips)
  local n = (k * 7 + me * 131) % ips
  return string.format("198.%d.%d.%d", 18 + math.floor(n / 65536) % 2, math.floor(n / 256) % 256, n % 256)
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
