// The organization quota of one plan (PLAN, QUOTA, TOKEN): a burst of q + 20% through
// several VUs, then SUSTAINED_S seconds at 1.5x the quota. Over the whole run the admitted
// count must match the token bucket: q + floor(q * elapsed / 60 s), +/- 1, never above.
import http from "k6/http";
import { check } from "k6";
import exec from "k6/execution";
import { Counter } from "k6/metrics";
import { API, headers, headersAgree, readTally, record, tally } from "./lib.js";

const PLAN = __ENV.PLAN;
const Q = Number(__ENV.QUOTA);
const TOKEN = __ENV.TOKEN;
const BURST_VUS = 12;
const BURST = Math.ceil(Q * 1.2);
const SUSTAINED_S = Number(__ENV.SUSTAINED_S || 120);

const overAdmitted = new Counter("quota_over_admitted");
const underAdmitted = new Counter("quota_under_admitted");

export const options = {
  scenarios: {
    burst: { executor: "per-vu-iterations", vus: BURST_VUS, iterations: 1, maxDuration: "30s", exec: "burst" },
    ...(SUSTAINED_S > 0
      ? {
          sustained: {
            executor: "constant-arrival-rate",
            rate: Math.round((1.5 * Q) / 6),
            timeUnit: "10s",
            duration: `${SUSTAINED_S}s`,
            preAllocatedVUs: 20,
            startTime: "5s",
            exec: "sustained",
          },
        }
      : {}),
  },
  thresholds: {
    quota_over_admitted: ["count==0"],
    quota_under_admitted: ["count==0"],
    checks: ["rate==1"],
  },
};

function one(ip) {
  const started = Date.now();
  const res = http.get(`${API}/api/v1/tags`, { headers: headers(TOKEN, ip), tags: { name: "tags" } });
  check(res, {
    "200 or 429": (r) => r.status === 200 || r.status === 429,
    "headers agree": (r) => headersAgree(r, PLAN, Q),
    "429 has the 2.2 body": (r) =>
      r.status !== 429 || (r.json("message") === "Too many requests" && /\/docs\/rate-limits$/.test(r.json("docs"))),
    "429 has Retry-After >= 1": (r) => r.status !== 429 || Number(r.headers["Retry-After"]) >= 1,
    "429 has r=0": (r) => r.status !== 429 || r.headers["Ratelimit-Remaining"] === "0",
  });
  return { res, started };
}

export function burst() {
  const vu = exec.vu.idInTest;
  const share = Math.ceil(BURST / BURST_VUS);
  const t = {};
  for (let i = (vu - 1) * share; i < Math.min(BURST, vu * share); i++) {
    const { res, started } = one(`10.1.${vu}.1`);
    record(t, res, started);
  }
  tally("quota", t);
}

export function sustained() {
  const { res, started } = one(`10.2.${exec.scenario.iterationInTest % 200}.1`);
  tally("quota", record({}, res, started));
}

export function teardown() {
  const t = readTally("quota");
  const admitted = t["200"] || 0;
  // The bucket was full at the first admission; it cannot have given more than it refilled
  // by the last answer, and every token that came back before the last request was taken.
  const upper = Q + Math.floor((Q * (t.lastEnd - t.firstStart)) / 60000);
  const lower = Q + Math.floor((Q * Math.max(0, t.lastStart - t.firstEnd)) / 60000) - 1;
  console.log(
    JSON.stringify({
      plan: PLAN,
      quota: Q,
      requests: (t["200"] || 0) + (t["429"] || 0),
      admitted,
      refused: t["429"] || 0,
      seconds: (t.lastEnd - t.firstStart) / 1000,
      expected: [lower, upper],
    }),
  );
  overAdmitted.add(Math.max(0, admitted - upper));
  underAdmitted.add(Math.max(0, lower - admitted));
}
