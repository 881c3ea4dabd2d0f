// Latency of sends at a fixed load (loadtest/bench.ts, part "sends"): POST API/api/v1/emails at
// RATE requests per second for SECONDS with the constant-arrival-rate executor (an open model:
// a slow answer cannot hide the requests that would have queued behind it). Like send.lua,
// request k carries the next "<token> <domain>" line of TOKENS_FILE, the client IP
// (k * 7) mod IPS from 198.18.0.0/15, and 200 bytes of text from app@<domain> to a recipient of
// its own.
import { SharedArray } from "k6/data";
import exec from "k6/execution";
import http from "k6/http";
import { API, benchIp, fixedRate, headers } from "./lib.js";

const RATE = Number(__ENV.RATE);
const SECONDS = Number(__ENV.SECONDS || 10);
const IPS = Number(__ENV.IPS || 4096);
const senders = new SharedArray("senders", () =>
  open(__ENV.TOKENS_FILE)
    .split("\n")
    .filter((l) => l.includes(" "))
    .map((l) => l.split(" ")),
);
const TEXT = "x".repeat(200);

export const options = {
  discardResponseBodies: true,
  scenarios: { sends: fixedRate(RATE, SECONDS) },
};

export default function () {
  const k = exec.scenario.iterationInTest;
  const [token, domain] = senders[k % senders.length];
  const body = `{"from":"app@${domain}","to":"k${__ENV.RUN}-${k}@rcpt.example","subject":"Your code ${k}","text":"${TEXT}"}`;
  http.post(`${API}/api/v1/emails`, body, {
    headers: headers(token, benchIp((k * 7) % IPS), { "Content-Type": "application/json" }),
  });
}
