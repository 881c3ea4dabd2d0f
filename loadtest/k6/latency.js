// Latency at a fixed load (loadtest/bench.ts): GET API/api/v1/tags at RATE requests per
// second for SECONDS with the constant-arrival-rate executor. Arrivals do not wait for
// answers (an open model, unlike wrk's closed loop), so a slow answer cannot hide the
// requests that would have queued behind it; when no VU is free, k6 drops the iteration
// and counts it in dropped_iterations. Like rotate.lua, request k carries the next token
// of TOKENS_FILE and the client IP (k * 7) mod IPS from 198.18.0.0/15.
import { SharedArray } from "k6/data";
import exec from "k6/execution";
import http from "k6/http";
import { API, headers } from "./lib.js";

const RATE = Number(__ENV.RATE);
const SECONDS = Number(__ENV.SECONDS || 10);
const IPS = Number(__ENV.IPS || 4096);
const tokens = new SharedArray("tokens", () =>
  open(__ENV.TOKENS_FILE)
    .split("\n")
    .filter((l) => l.length > 0),
);

export const options = {
  discardResponseBodies: true,
  scenarios: {
    latency: {
      executor: "constant-arrival-rate",
      rate: RATE,
      timeUnit: "1s",
      duration: `${SECONDS}s`,
      // VUs made up front for 50 ms of latency (making one mid-run costs CPU the target
      // would miss), more up to 200 ms before iterations are dropped.
      preAllocatedVUs: Math.max(10, Math.ceil(RATE / 20)),
      maxVUs: Math.max(50, Math.ceil(RATE / 5)),
    },
  },
};

function ip(n) {
  return `198.${18 + (Math.floor(n / 65536) % 2)}.${Math.floor(n / 256) % 256}.${n % 256}`;
}

export default function () {
  const k = exec.scenario.iterationInTest;
  http.get(`${API}/api/v1/tags`, { headers: headers(tokens[k % tokens.length], ip((k * 7) % IPS)) });
}
