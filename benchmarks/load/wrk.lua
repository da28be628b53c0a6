-- wrk script for benchmarks.load: method, body and token from the environment; JSON summary at the end.
--   BENCH_METHOD  GET or POST          BENCH_BODY  path of a JSON file sent as the body (POST)
--   BENCH_TOKEN   DRF token            BENCH_OUT   file the summary is written to (JSON)
--   BENCH_VARY    1: every request's body names a workload no request named before (its "name" prefixed with a
--                 count), so nothing the service keeps per workload is found: each request is a new workload
wrk.method = os.getenv("BENCH_METHOD") or "GET"
wrk.headers["Authorization"] = "Token " .. (os.getenv("BENCH_TOKEN") or "")
wrk.headers["Accept"] = "application/json"
local body_path = os.getenv("BENCH_BODY")
if body_path and body_path ~= "" then
  local f = assert(io.open(body_path, "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end

local vary = os.getenv("BENCH_VARY") == "1"
local sent = 0
local thread_tag = ""

function setup(thread)
  thread:set("thread_tag", tostring(math.random(1, 1000000000)))
end

if vary then
  request = function()
    sent = sent + 1
    local body = string.gsub(wrk.body, '"name"%s*:%s*"', '"name": "new-' .. thread_tag .. '-' .. sent .. '-', 1)
    return wrk.format(nil, nil, nil, body)
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local out = assert(io.open(os.getenv("BENCH_OUT"), "w"))
  out:write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "errors": {"connect": %d, "read": %d, "write": %d, ' ..
    '"status": %d, "timeout": %d}, "latency_us": {"p50": %d, "p90": %d, "p99": %d, "max": %d, "mean": %.1f}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
  out:close()
end
