// test-runner: alone
// A campaign to 2,000 subscribers spread over 20 recipient domains, each with its own MX host on
// a loopback address, delivered by a worker with DELIVERY=mx; one destination is down (nothing
// listens on its address). The others' mail goes out at the bulk lane's exact pace as if the
// down one were not there:
// - the lane's slots hold at most 40 in any sliding 1,000 ms;
// - every message to the 19 live destinations is delivered, once, on its first attempt (released
//   once): none was held back behind the down destination, whose mail is deferred (its
//   destination suspended after the first refusals) and retried in its own slots later;
// - none reached its receiver before its slot.
// The delay from slot to receiver is printed, not held to a bound: it is the machine's.
// About 60 s over real time (2,000 slots at 40 a second): this file runs alone.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { limiterClients } from "../limiterclient/client";
import { type Dnsmasq, type DnsRecord, startDnsmasq } from "../testkit/dnsmasq";
import { type MxReceiver, startMxReceiver } from "../testkit/mxreceivers";
import { pacing, spacing } from "../testkit/pacing";
import { freePort, type Stack, startStack, waitFor } from "../testkit/testkit";

const AUDIENCE = 2_000;
const DOMAINS = 20;
/** The destination that is down: d19.test. */
const DOWN = DOMAINS - 1;
const address = (d: number) => `127.0.0.${70 + d}`;

type Json = Record<string, any>;

let stack: Stack;
let dns: Dnsmasq;
const receivers: MxReceiver[] = [];

beforeAll(async () => {
  const port = await freePort();
  for (let d = 0; d < DOMAINS; d++)
    if (d !== DOWN) receivers.push(await startMxReceiver({ address: address(d), port, tls: false }));
  const records: DnsRecord[] = Array.from({ length: DOMAINS }, (_, d) => [
    { type: "MX" as const, name: `d${d}.test`, preference: 10, exchange: `mx.d${d}.test` },
    { type: "A" as const, name: `mx.d${d}.test`, address: address(d) },
  ]).flat();
  dns = await startDnsmasq(records);
  stack = await startStack({ workers: 0, env: { DNS_SERVER: dns.address, TRUST_PROXY: "127.0.0.1" } });
  stack.startWorker({ DELIVERY: "mx", MX_PORT: String(port), MX_ALLOW_PRIVATE: "1", MX_SETUP_TIMEOUT_MS: "2000" });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all([dns?.stop(), ...receivers.map((r) => r.stop())]);
});

async function api(token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      "X-Forwarded-For": "10.9.0.1",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;

test("2,000 recipients over 20 destinations, one down: the others delivered once, at the lane's exact pace", async () => {
  const token = await stack.org("spread", "enterprise");
  for (let b = 0; b < AUDIENCE / 1_000; b++) {
    const subscribers = Array.from({ length: 1_000 }, (_, i) => {
      const n = b * 1_000 + i;
      return { email: `r${n}@d${n % DOMAINS}.test`, name: `Reader ${n}` };
    });
    expect(
      (await api(token, "POST", "/api/v1/subscribers/batch", { subscribers, triggerWorkflows: false })).status,
    ).toBe(200);
  }
  const campaign = (
    await api(token, "POST", "/api/v1/campaigns", {
      name: "Spread",
      from: "News <news@spread.example>",
      subject: "Hi {{subscriber.name}}",
      text: "Hello",
      audience: { all: true },
    })
  ).body;
  const started = Date.now();
  expect((await api(token, "POST", `/api/v1/campaigns/${campaign.id}/send`, {})).status).toBe(202);

  const live = (AUDIENCE / DOMAINS) * (DOMAINS - 1);
  const received = () => receivers.reduce((n, r) => n + r.received.length, 0);
  await waitFor(`${live} delivered`, async () => received() >= live, 90_000, 500);
  await Bun.sleep(1_000); // a copy would come now

  const all = receivers.flatMap((r) => r.received);
  expect(all).toHaveLength(live);
  expect(new Set(all.map((m) => m.to)).size).toBe(live);
  expect(all.some((m) => m.to.endsWith(`@d${DOWN}.test`))).toBe(false);

  const daemon = limiterClients(stack.limiterUrl, stack.credential);
  // Every release since the start: the live destinations' messages, and the down one's retries.
  const bulk = (await daemon.lanes.listReleases({ lane: Lane.BULK, sinceMs: BigInt(started) })).releases;
  const slots = pacing(bulk);
  const arrivals = spacing(all.map((m) => m.at));
  // From its slot to its receiver, by the Message-ID each carries.
  const slotOf = new Map(bulk.map((r) => [r.messageId, Number(r.slotAtMs)]));
  const late = all
    .map((m) => {
      const id = /^Message-ID: <(msg_[0-9a-f]+)@/im.exec(m.raw.toString("latin1"))?.[1] ?? "";
      return m.at - (slotOf.get(id) ?? Number.NaN);
    })
    .filter((ms) => !Number.isNaN(ms))
    .sort((a, b) => a - b);
  console.log(
    `mx campaign: ${live} delivered over ${(slots.spanMs / 1_000).toFixed(1)} s of slots (at most ${slots.maxSliding} in a sliding second, released ${slots.lead.min} to ${slots.lead.max} ms ahead; at the receivers ${arrivals.maxSliding}, per second ${arrivals.perSecond.join(" ")}); slot to receiver p50 ${quantile(late, 0.5)} ms, p99 ${quantile(late, 0.99)} ms, max ${late.at(-1)} ms`,
  );
  expect(slots.maxSliding).toBeLessThanOrEqual(40);
  expect(late).toHaveLength(live);
  expect(late[0]!).toBeGreaterThanOrEqual(-10); // never before its slot (the clock's grain aside)
  const releases = Map.groupBy(bulk, (r) => r.messageId);
  const liveIds = all.map((m) => /^Message-ID: <(msg_[0-9a-f]+)@/im.exec(m.raw.toString("latin1"))![1]!);
  expect(liveIds.filter((id) => releases.get(id)?.length !== 1)).toEqual([]);

  // The down destination's mail: deferred, with a try that names the refusal or the suspension.
  const page = await api(token, "GET", `/api/v1/emails?to=r${DOWN}@d${DOWN}.test`);
  const id = page.body.data[0].id as string;
  const one = (await api(token, "GET", `/api/v1/emails/${id}`)).body;
  expect(one.status).not.toBe("delivered");
  expect(one.deliveryAttempts[0].stage).toMatch(/^(connect|queue)$/);
}, 120_000);
