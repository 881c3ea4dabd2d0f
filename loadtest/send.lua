-- wrk script (POST of the URL's path): each request a send of its own, as a client of the API
-- makes it. Request k carries the next line of the file, "<token> <sending domain>", its
-- client IP from 198.18.0.0/15 in X-Forwarded-For, and a JSON body of about 200 bytes of text
-- from app@<domain> to a recipient of its own (r<thread>-<k>@rcpt.example: every send is
-- counted by the recipient guards, none reaches their limit). Counts responses by status and
-- prints them, with the summary and latency percentiles, as one line "BENCH_JSON {...}".
-- Arguments after "--": <file of "<token> <domain>" lines> [<number of client IPs>]

local senders = {}
local ips = 4096
local me = 1
local k = 0
local text = string.rep("x", 200)

function init(args)
  for line in io.lines(args[1]) do
    local token, domain = line:match("^(%S+) (%S+)$")
    if token then senders[#senders + 1] = { token = token, domain = domain } end
  end
  if #senders == 0 then error("no \"<token> <domain>\" lines in " .. tostring(args[1])) end
  ips = tonumber(args[2] or "4096")
  me = id or 1
end

function request()
  k = k + 1
  local s = senders[((k + me * 977) % #senders) + 1]
  local ip = client_ip(k, me, ips)
  local body = string.format(
    '{"from":"app@%s","to":"r%d-%d@rcpt.example","subject":"Your code %d","text":"%s"}',
    s.domain, me, k, k, text)
  return wrk.format("POST", wrk.path, {
    ["Authorization"] = "Bearer " .. s.token,
    ["X-Forwarded-For"] = ip,
    ["Content-Type"] = "application/json",
  }, body)
end
