// Recipient guards under concurrency: 10 VUs send 4 each to one mailbox at once (exactly 5
// accepted, the rest RECIPIENT_RATE_LIMITED with Retry-After); meanwhile 8 other mailboxes of
// the same organization get 5 each (all accepted) and fixtures get 40 (all accepted).
import http from "k6/http";
import { check } from "k6";
import exec from "k6/execution";
import { Counter } from "k6/metrics";
import { API, headers } from "./lib.js";

const TOKEN = __ENV.TOKEN;
const DOMAIN = __ENV.DOMAIN;

const hotAccepted = new Counter("guard_hot_accepted");
const hotLimited = new Counter("guard_hot_limited");
const otherRefused = new Counter("guard_other_refused");
const fixtureRefused = new Counter("guard_fixture_refused");

export const options = {
  scenarios: {
    hot: { executor: "per-vu-iterations", vus: 10, iterations: 4, exec: "hot" },
    others: { executor: "per-vu-iterations", vus: 8, iterations: 5, exec: "others" },
    fixtures: { executor: "per-vu-iterations", vus: 4, iterations: 10, exec: "fixtures" },
  },
  thresholds: {
    guard_hot_accepted: ["count==5"],
    guard_hot_limited: ["count==35"],
    guard_other_refused: ["count==0"],
    guard_fixture_refused: ["count==0"],
    checks: ["rate==1"],
  },
};

function send(to) {
  const body = JSON.stringify({ from: `Acme <no-reply@${DOMAIN}>`, to, subject: "Your code", text: "123456" });
  const ip = `10.3.${exec.vu.idInTest}.1`;
  return http.post(`${API}/api/v1/emails`, body, {
    headers: headers(TOKEN, ip, { "Content-Type": "application/json" }),
    tags: { name: "emails" },
  });
}

export function hot() {
  const res = send(exec.vu.idInTest % 2 ? "kim@example.org" : "Kim+k6@Example.org");
  if (res.status === 202) hotAccepted.add(1);
  if (res.status === 429) hotLimited.add(1);
  check(res, {
    "202 or 429": (r) => r.status === 202 || r.status === 429,
    "429 is RECIPIENT_RATE_LIMITED": (r) =>
      r.status !== 429 ||
      (r.json("code") === "RECIPIENT_RATE_LIMITED" &&
        r.json("message") === "This recipient is temporarily rate limited."),
    "429 has Retry-After": (r) => r.status !== 429 || Number(r.headers["Retry-After"]) > 0,
  });
}

export function others() {
  const res = send(`user${exec.vu.idInTest}@example.org`);
  if (res.status !== 202) otherRefused.add(1);
}

export function fixtures() {
  const res = send(`delivered+${exec.vu.idInTest}@fixtures.test`);
  if (res.status !== 202) fixtureRefused.add(1);
}
