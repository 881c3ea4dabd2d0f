-- wrk script (GET of the URL's path): every request carries another Authorization token and X-Forwarded-For
-- client IP (from 198.18.0.0/15, the benchmarking range), from a ring of requests
-- formatted once per thread. Counts responses by status and prints them, with the
-- summary and latency percentiles, as one line "BENCH_JSON {...}" at the end.
-- Arguments after "--": <file with one token a line> [<number of client IPs>]

local ring = {}
local ring_size = 0
local at = 0

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
    local ip = client_ip(k, me, ips)
    ring[k + 1] = wrk.format("GET", wrk.path, { ["Authorization"] = "Bearer " .. token, ["X-Forwarded-For"] = ip })
  end
end

function request()
  at = at % ring_size + 1
  return ring[at]
end
