// The IP limit: one client IP sends 800 requests per second for SECONDS (no token, so
// nothing but the IP bucket limits it); it may be admitted at most what a bucket of 500
// refilled at 500/s gives (+/- 1). A second IP, at 20 per second meanwhile, is never limited.
import http from "k6/http";
import { check } from "k6";
import { Counter } from "k6/metrics";
import { API, headers, readTally, record, tally } from "./lib.js";

const SECONDS = Number(__ENV.SECONDS || 3);
const overAdmitted = new Counter("ip_over_admitted");
const underAdmitted = new Counter("ip_under_admitted");
const otherLimited = new Counter("ip_other_limited");

export const options = {
  scenarios: {
    flood: {
      executor: "constant-arrival-rate",
      rate: 800,
      timeUnit: "1s",
      duration: `${SECONDS}s`,
      preAllocatedVUs: 40,
      maxVUs: 200,
      exec: "flood",
    },
    bystander: {
      executor: "constant-arrival-rate",
      rate: 20,
      timeUnit: "1s",
      duration: `${SECONDS}s`,
      preAllocatedVUs: 5,
      exec: "bystander",
    },
  },
  thresholds: {
    ip_over_admitted: ["count==0"],
    ip_under_admitted: ["count==0"],
    ip_other_limited: ["count==0"],
    checks: ["rate==1"],
  },
};

function one(ip) {
  const started = Date.now();
  const res = http.get(`${API}/api/v1/tags`, { headers: headers(null, ip), tags: { name: "tags" } });
  check(res, {
    "401 or 429": (r) => r.status === 401 || r.status === 429,
    "429 body and Retry-After": (r) =>
      r.status !== 429 || (r.json("message") === "Too many requests" && Number(r.headers["Retry-After"]) >= 1),
    "minimum policy advertised": (r) => r.headers["Ratelimit-Policy"] === '"free";q=100;w=60',
  });
  return { res, started };
}

export function flood() {
  const { res, started } = one("198.51.100.7");
  tally("flood", record({}, res, started));
}

export function bystander() {
  const { res } = one("198.51.100.8");
  if (res.status === 429) otherLimited.add(1);
}

export function teardown() {
  const t = readTally("flood");
  const admitted = t["401"] || 0;
  const upper = 500 + Math.floor((500 * (t.lastEnd - t.firstStart)) / 1000);
  // Arrivals (800/s) outpace the refill (500/s), so every token made before the last request is used.
  const lower = 500 + Math.floor((500 * Math.max(0, t.lastStart - t.firstEnd)) / 1000) - 1;
  console.log(
    JSON.stringify({
      requests: admitted + (t["429"] || 0),
      admitted,
      refused: t["429"] || 0,
      seconds: (t.lastEnd - t.firstStart) / 1000,
      expected: [lower, upper],
    }),
  );
  overAdmitted.add(Math.max(0, admitted - upper));
  underAdmitted.add(Math.max(0, lower - admitted));
}
