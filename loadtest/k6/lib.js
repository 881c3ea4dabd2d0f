// Shared helpers of the k6 scripts. Everything talks to loopback addresses the harness
// (loadtest/run.ts) passes in: API (the API's base URL), COLLECTOR (a tally server the
// harness runs, because k6 VUs share no state), LIMITER (host:port of limiterd).
import http from "k6/http";

export const API = __ENV.API;
export const COLLECTOR = __ENV.COLLECTOR;

/** Headers of one request: the token, and the client IP the API attributes it to (TRUST_PROXY). */
export function headers(token, ip, extra) {
  const h = Object.assign({ "X-Forwarded-For": ip }, extra || {});
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

/** Client IP n from 198.18.0.0/15 (the benchmarking range), as rotate.lua and send.lua make them. */
export function benchIp(n) {
  return `198.${18 + (Math.floor(n / 65536) % 2)}.${Math.floor(n / 256) % 256}.${n % 256}`;
}

/**
 * A scenario of RATE arrivals a second for SECONDS (an open model: arrivals do not wait for
 * answers). VUs made up front for 50 ms of latency (making one mid-run costs CPU the target
 * would miss), more up to 200 ms before iterations are dropped (counted in dropped_iterations).
 */
export function fixedRate(rate, seconds) {
  return {
    executor: "constant-arrival-rate",
    rate,
    timeUnit: "1s",
    duration: `${seconds}s`,
    preAllocatedVUs: Math.max(10, Math.ceil(rate / 20)),
    maxVUs: Math.max(50, Math.ceil(rate / 5)),
  };
}

/** Adds counts and time bounds to the harness's tally (kept out of the API's metrics by its tag). */
export function tally(name, t) {
  http.post(`${COLLECTOR}/tally/${name}`, JSON.stringify(t), {
    headers: { "Content-Type": "application/json" },
    tags: { name: "collector" },
  });
}

export function readTally(name) {
  return JSON.parse(http.get(`${COLLECTOR}/tally/${name}`, { tags: { name: "collector" } }).body);
}

/** One response folded into a tally: counts by status, first start and last end (ms). */
export function record(t, res, startedMs) {
  t[res.status] = (t[res.status] || 0) + 1;
  t.firstStart = Math.min(t.firstStart === undefined ? Infinity : t.firstStart, startedMs);
  t.lastStart = Math.max(t.lastStart === undefined ? 0 : t.lastStart, startedMs);
  t.firstEnd = Math.min(t.firstEnd === undefined ? Infinity : t.firstEnd, Date.now());
  t.lastEnd = Math.max(t.lastEnd === undefined ? 0 : t.lastEnd, Date.now());
  return t;
}

/** The rate-limit headers of a response agree with each other and with the policy. */
export function headersAgree(res, policy, quota) {
  const h = res.headers;
  const r = h["Ratelimit-Remaining"];
  const t = h["Ratelimit-Reset"];
  return (
    h["Ratelimit-Policy"] === `"${policy}";q=${quota};w=60` &&
    h.Ratelimit === `"${policy}";r=${r};t=${t}` &&
    h["Ratelimit-Limit"] === String(quota) &&
    h["X-Ratelimit-Limit"] === String(quota) &&
    h["X-Ratelimit-Remaining"] === r &&
    h["X-Ratelimit-Reset"] === t &&
    Number(r) >= 0 &&
    Number(r) <= quota &&
    Number(t) >= 0 &&
    Number(t) <= 60
  );
}
