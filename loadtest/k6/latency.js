// Latency at a fixed load (loadtest/bench.ts): GET API/api/v1/tags at RATE requests per
// second for SECONDS with the constant-arrival-rate executor. Arrivals do not wait for
// answers (an open model, unlike wrk's closed loop), so a slow answer cannot hide the
// requests that would have queued behind it; when no VU is free, k6 drops the iteration
// and counts it in dropped_iterations. Like rotate.lua, request k carries the next token
// of TOKENS_FILE and the client IP (k * 7) mod IPS from 198.18.0.0/15.
import { SharedArray } from "k6/data";
import exec from "k6/execution";
import http from "k6/http";
import { API, benchIp, fixedRate, headers } from "./lib.js";

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
  scenarios: { latency: fixedRate(RATE, SECONDS) },
};

export default function () {
  const k = exec.scenario.iterationInTest;
  http.get(`${API}/api/v1/tags`, { headers: headers(tokens[k % tokens.length], benchIp((k * 7) % IPS)) });
}
