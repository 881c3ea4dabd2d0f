// The lanes under load: a backlog of N_TX transactional and N_BULK bulk fixture messages,
// then transactional messages sent while the bulk lane is still full. The releases' slots are
// read back from limiterd over gRPC (LaneService.ListReleases): every whole second of each
// lane's backlog holds 40 +/- 1 slots (no sliding second above 41), and a transactional
// message's slot comes within 50 ms of its acceptance.
import http from "k6/http";
import grpc from "k6/net/grpc";
import { check, sleep } from "k6";
import { Counter, Trend } from "k6/metrics";
import { API, headers } from "./lib.js";

const TOKENS = JSON.parse(__ENV.TOKENS); // [{token, domain}], enterprise organizations
const N_TX = Number(__ENV.N_TX || 600);
const N_BULK = Number(__ENV.N_BULK || 2000);
const RATE = Number(__ENV.LANE_RATE || 40);
const DELAY_START_S = Math.ceil(N_TX / RATE) + 5;

const lanes = new grpc.Client();
lanes.load([__ENV.PROTO_DIR], "mailcore/limiter/v1/mail.proto");

const pacingViolations = new Counter("lane_pacing_violations");
const releaseDelay = new Trend("tx_release_delay_ms", true);
const refused = new Counter("lane_sends_refused");

export const options = {
  setupTimeout: "120s",
  scenarios: {
    behind_bulk: {
      executor: "constant-arrival-rate",
      rate: 4,
      timeUnit: "1s",
      duration: "10s",
      preAllocatedVUs: 4,
      startTime: `${DELAY_START_S}s`,
      exec: "behindBulk",
    },
  },
  thresholds: {
    lane_pacing_violations: ["count==0"],
    tx_release_delay_ms: ["max<50"],
    lane_sends_refused: ["count==0"],
    checks: ["rate==1"],
  },
};

let seq = 0;
function email(i, lane, to) {
  const org = TOKENS[i % TOKENS.length];
  return {
    method: "POST",
    url: `${API}/api/v1/emails`,
    body: JSON.stringify({ from: `App <app@${org.domain}>`, to, subject: `m${i}`, text: "x", lane }),
    params: {
      headers: headers(org.token, `10.4.${(i >> 8) & 255}.${i & 255}`, { "Content-Type": "application/json" }),
      tags: { name: "emails" },
    },
  };
}

export function setup() {
  const start = Date.now();
  const all = [];
  for (let i = 0; i < N_TX + N_BULK; i++)
    all.push(
      i < N_TX
        ? email(i, "transactional", `delivered+t${i}@fixtures.test`)
        : email(i, "bulk", `delivered+b${i}@fixtures.test`),
    );
  for (let i = 0; i < all.length; i += 50) {
    for (const res of http.batch(all.slice(i, i + 50))) if (res.status !== 202) refused.add(1);
  }
  return { start, backlogged: Date.now() };
}

function releases(lane, since) {
  const res = lanes.invoke("mailcore.limiter.v1.LaneService/ListReleases", { lane, sinceMs: String(since) });
  return (res.message.releases || []).map((r) => ({ id: r.messageId, at: Number(r.slotAtMs) }));
}

export function behindBulk() {
  lanes.connect(__ENV.LIMITER, { plaintext: true, reflect: false });
  const i = 1_000_000 + seq++ * 100 + __VU;
  const req = email(i, "transactional", `code${i}@example.org`);
  const res = http.request(req.method, req.url, req.body, req.params);
  if (!check(res, { accepted: (r) => r.status === 202 })) return refused.add(1);
  const id = res.json("id");
  const org = TOKENS[i % TOKENS.length];
  const view = http.get(`${API}/api/v1/emails/${id}`, {
    headers: headers(org.token, `10.5.0.${__VU}`),
    tags: { name: "email" },
  });
  const accepted = Date.parse(view.json("createdAt"));
  for (let tries = 0; tries < 100; tries++) {
    const r = releases("LANE_TRANSACTIONAL", accepted).find((x) => x.id === id);
    if (r) return releaseDelay.add(r.at - accepted);
    sleep(0.01);
  }
  releaseDelay.add(10_000); // never released: fails the threshold
}

/** Whole seconds of a lane from `from` until its backlog ran out, each 40 +/- 1; no sliding second above RATE + 1. */
function checkPacing(name, times, from, until) {
  const inWindow = times.filter((t) => t >= from && t <= until);
  const counts = [];
  for (const t of inWindow) counts[Math.floor((t - from) / 1000)] = (counts[Math.floor((t - from) / 1000)] || 0) + 1;
  const whole = Array.from(counts.slice(0, Math.floor((until - from) / 1000)), (n) => n || 0);
  let bad = whole.filter((n) => n < RATE - 1 || n > RATE + 1).length;
  let maxSliding = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j] < times[i] - 999) j++;
    maxSliding = Math.max(maxSliding, i - j + 1);
  }
  if (maxSliding > RATE + 1) bad++;
  console.log(JSON.stringify({ lane: name, perSecond: whole, maxSliding, violations: bad }));
  pacingViolations.add(bad);
}

export function teardown(data) {
  lanes.connect(__ENV.LIMITER, { plaintext: true, reflect: false });
  const tx = releases("LANE_TRANSACTIONAL", data.start)
    .map((r) => r.at)
    .sort((a, b) => a - b);
  const bulk = releases("LANE_BULK", data.start)
    .map((r) => r.at)
    .sort((a, b) => a - b);
  // The initial backlog of each lane is released by its N-th release; measured from the
  // moment the whole backlog was queued.
  checkPacing("transactional", tx, data.backlogged, tx[N_TX - 1]);
  checkPacing("bulk", bulk, data.backlogged, bulk[N_BULK - 1] ?? bulk.at(-1));
}
