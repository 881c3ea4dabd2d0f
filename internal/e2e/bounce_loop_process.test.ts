// The whole loop after a send, through real processes: limiterd, an API process, a worker that
// delivers to the recipients' MX hosts (DELIVERY=mx) and the inbound MX (cmd/inbound), against a
// dnsmasq of the test's own that publishes the sending domain's records as the API shows them.
// A real Postfix (testkit/postfix.ts) is the MX of its local domain: it takes the message with a
// 250, finds no such user, and writes a DSN to the message's return path, which it sends where
// DNS says the return path's mail goes (the return-path MX: our inbound MX). The DSN is tied to
// its message, the mailbox goes on the spec's cooldown and on the organization's suppression list,
// the next send to it is refused at once, and email.bounced reaches the organization's webhook.
// Then a tracked send to an MX receiver that keeps it: its DKIM signature verifies with
// python3-dkim over the rewritten links, and a rewritten link redirects to the original only.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Resolver } from "node:dns/promises";
import { simpleParser } from "mailparser";
import { dkimpy } from "../testkit/dkimverifiers";
import { type Dnsmasq, oneMx, type ShownRecord, startDnsmasq, tableOf } from "../testkit/dnsmasq";
import { type MxReceiver, startMxReceiver } from "../testkit/mxreceivers";
import { LOCAL_DOMAIN, type Postfix, startPostfix } from "../testkit/postfix";
import { type Receiver, startReceiver } from "../testkit/receiver";
import {
  freePort,
  type InboundProc,
  type Stack,
  sendEmail,
  startInbound,
  startStack,
  waitFor,
} from "../testkit/testkit";

const DOMAIN = "loop.example";
/** The platform's host that receives bounces: the MX the return-path record names. */
const INBOUND_MX = "mx.platform.test";
const PUBLIC_URL = "https://mail.platform.test";
/** Each on a loopback address of its own; Postfix and the keeping receiver on the worker's MX_PORT. */
const POSTFIX_ADDRESS = "127.0.0.71";
const KEEPER_ADDRESS = "127.0.0.72";
const INBOUND_ADDRESS = "127.0.0.73";
const KEEPER_DOMAIN = "keeper.test";
/** Local users Postfix does not have: each message to one is taken at RCPT and bounced after. */
const GHOSTS = ["ghost1", "ghost2", "ghost3"].map((u) => `${u}@${LOCAL_DOMAIN}`);
const BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

type Json = Record<string, any>;

let dns: Dnsmasq;
let stack: Stack;
let inbound: InboundProc;
let postfix: Postfix;
let keeper: MxReceiver;
let hooks: Receiver;
let token: string;
let other: string;

async function api(method: string, path: string, body?: unknown, as = token): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${as}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Json) };
}

async function send(to: string, extra: Json = {}, as = token) {
  return sendEmail(stack.apiUrls[0]!, as, {
    from: `Loop <app@${DOMAIN}>`,
    to,
    subject: `To ${to}`,
    text: "Hello.",
    ...extra,
  });
}

beforeAll(async () => {
  dns = await startDnsmasq([]);
  const mxPort = await freePort();
  stack = await startStack({
    env: {
      DNS_SERVER: dns.address,
      INBOUND_MX_HOST: INBOUND_MX,
      PUBLIC_URL,
      WEBHOOK_ALLOW_PRIVATE_URLS: "1",
    },
  });
  stack.startWorker({ DELIVERY: "mx", MX_PORT: String(mxPort), MX_ALLOW_PRIVATE: "1" });
  token = await stack.org("loop", "enterprise");
  other = await stack.org("other", "enterprise");
  inbound = await startInbound(stack, INBOUND_ADDRESS);
  keeper = await startMxReceiver({ address: KEEPER_ADDRESS, port: mxPort });
  hooks = startReceiver();

  // The sending domain's records as the API shows them, the inbound MX's address, and the MX
  // hosts of the two recipient domains; the domain verifies against them.
  const domain = (await api("GET", "/api/v1/domains")).body.data.find((d: Json) => d.name === DOMAIN);
  await dns.setRecords([
    ...tableOf(domain.records as ShownRecord[]),
    { type: "A", name: INBOUND_MX, address: INBOUND_ADDRESS },
    ...oneMx(LOCAL_DOMAIN, POSTFIX_ADDRESS),
    ...oneMx(KEEPER_DOMAIN, KEEPER_ADDRESS),
  ]);
  const verified = await api("POST", `/api/v1/domains/${domain.id}/verify`);
  expect(verified.body.records.map((r: Json) => [r.purpose, r.status])).toEqual([
    ["verification", "verified"],
    ["dkim", "verified"],
    ["return-path", "verified"],
    ["spf", "verified"],
    ["dmarc", "verified"],
  ]);
  expect(verified.body.status).toBe("verified");

  // Postfix reads the system's resolvers, never the test's DNS server: its route for the return
  // paths is what the test's DNS answers for them, the return-path MX's host and address.
  const resolver = new Resolver();
  resolver.setServers([dns.address]);
  const [mx] = await resolver.resolveMx(`bounces.${DOMAIN}`);
  const [address] = await resolver.resolve4(mx!.exchange);
  expect([mx!.exchange, address]).toEqual([INBOUND_MX, INBOUND_ADDRESS]);
  postfix = await startPostfix({
    host: POSTFIX_ADDRESS,
    port: mxPort,
    routes: { [`bounces.${DOMAIN}`]: { host: address!, port: inbound.port } },
  });
}, 120_000);

afterAll(async () => {
  await postfix?.stop();
  await Promise.all([inbound?.proc.stop(), keeper?.stop(), hooks?.stop()]);
  await stack?.stop();
  await dns?.stop();
});

test("a message Postfix takes and then bounces: its DSN comes back to our inbound MX, is tied to the message, and the mailbox is suppressed and cooled", async () => {
  const hook = await api("POST", "/api/v1/webhooks", { url: `${hooks.url}/bounces`, events: ["email.bounced"] });
  expect(hook.status).toBe(201);

  const started = performance.now();
  const ids: string[] = [];
  for (const to of GHOSTS) {
    const sent = await send(to);
    expect(sent.status).toBe(202);
    ids.push(sent.body.id as string);
  }
  // Each DSN answered by the inbound MX: applied to the message its return path names.
  await waitFor(
    "a DSN for each message at the inbound MX",
    async () => inbound.reports().length >= GHOSTS.length,
    90_000,
  ).catch((err) => {
    throw new Error(
      `${err.message}; got ${JSON.stringify(inbound.reports())}\n${postfix.log()}\n${inbound.proc.stderr()}`,
    );
  });
  const loopMs = performance.now() - started;
  const reports = inbound.reports();
  const tied = ids.filter((id) =>
    reports.some((r) => r.reply === "250 2.0.0" && r.said === `Applied to ${id}` && r.rcpt.startsWith(`${id}-`)),
  );
  const ms = reports.map((r) => r.ms).sort((a, b) => a - b);
  console.log(
    `DSNs from Postfix tied to their message: ${tied.length} of ${ids.length}; from a DSN's arrival (end of DATA at the inbound MX) to its cooldown and suppression in effect (limiterd's answer): min ${ms[0]} ms, max ${ms.at(-1)} ms; from the first send to the last DSN answered: ${Math.round(loopMs)} ms`,
  );
  expect(tied).toEqual(ids);
  // The DSN was Postfix's own, written after it had taken the message with a 250, and sent to
  // the return path (its log says so once it has the inbound MX's reply).
  const dsnSent = new RegExp(
    `to=<${ids[0]}-[a-z2-7]{16}@bounces\\.loop\\.example>.*status=sent \\(250 2\\.0\\.0 Applied to ${ids[0]}`,
  );
  await waitFor("Postfix's log of the DSN it sent", async () => dsnSent.test(postfix.log()), 30_000);
  expect(postfix.log()).toMatch(/status=bounced \(unknown user: "ghost1"\)/);

  const [id, to] = [ids[0]!, GHOSTS[0]!];
  // Delivered to Postfix (250 to the dot); the DSN that came after makes it a bounce, last in its
  // history. It came within a second of the delivery, before the records held the message as
  // final: its entry is written once they do, and shown once the hot store's copy has settled.
  let message: Json = {};
  await waitFor(
    "the bounce in the message's history",
    async () => {
      message = (await api("GET", `/api/v1/emails/${id}`)).body;
      return message.status === "bounced";
    },
    30_000,
  ).catch((err) => {
    throw new Error(`${err.message}; the message: ${JSON.stringify(message)}`);
  });
  expect(message.events.map((e: Json) => e.status).slice(-2)).toEqual(["delivered", "bounced"]);
  expect(message.events.at(-1).detail).toStartWith("hard bounce 5.1.1");
  expect(message.deliveryAttempts.at(-1)).toMatchObject({ address: POSTFIX_ADDRESS, stage: "data" });

  // On the organization's suppression list, tied to the message, with the DSN's status.
  const listed = (await api("GET", "/api/v1/suppressions?reason=hard_bounce&limit=100")).body.data as Json[];
  expect(listed.map((s) => [s.email, s.reason, s.messageId]).sort()).toEqual(
    GHOSTS.map((g, i) => [g, "hard_bounce", ids[i]]).sort(),
  );
  expect(listed.find((s) => s.email === to)!.detail).toStartWith("5.1.1");
  // The next send to it is refused at once, nothing queued; the mailbox's cooldown refuses
  // another organization's transactional send too.
  const again = await send(to);
  expect([again.status, again.body.code]).toEqual([422, "RECIPIENT_SUPPRESSED"]);
  expect(again.body.message).toContain("hard_bounce");
  const theirs = await send(to, { from: "app@other.example" }, other);
  // The bounce cooldown (BOUNCE_COOLDOWN_S, an hour), not a per-second limit.
  expect([theirs.status, theirs.body.code]).toEqual([429, "RECIPIENT_RATE_LIMITED"]);
  expect(Number(theirs.headers.get("retry-after"))).toBeGreaterThan(600);
  expect((await api("GET", "/api/v1/suppressions", undefined, other)).body.data).toEqual([]);

  // email.bounced at the organization's webhook, one per DSN, with the bounce's classification.
  await waitFor("email.bounced at the webhook", async () => hooks.at("/bounces").length >= GHOSTS.length, 30_000);
  const events = hooks.at("/bounces").map((r) => JSON.parse(r.body) as Json);
  const first = events.find((e) => e.data.emailId === id)!;
  expect(first).toMatchObject({
    type: "email.bounced",
    data: { emailId: id, to, source: "dsn", bounce: { type: "hard", status: "5.1.1" } },
  });
  expect(first.data.bounce.diagnostic).toContain("unknown user");
  expect(events.map((e) => e.data.emailId).sort()).toEqual([...ids].sort());
}, 120_000);

test("a tracked send, kept by its receiver: signed over the rewritten links, and a rewritten link redirects to its original only", async () => {
  const original = "https://shop.example/offer?x=1&y=2";
  const sent = await send(`kim@${KEEPER_DOMAIN}`, {
    html: '<p>Hi, <a href="https://shop.example/offer?x=1&amp;y=2">the offer</a>.</p>',
    tracking: { clicks: true, opens: true },
  });
  expect(sent.status).toBe(202);
  const id = sent.body.id as string;
  await waitFor(
    `${id} at the receiver`,
    async () => keeper.received.some((r) => r.to === `kim@${KEEPER_DOMAIN}`),
    60_000,
  );
  const kept = keeper.received.find((r) => r.to === `kim@${KEEPER_DOMAIN}`)!;
  expect(kept.from).toMatch(new RegExp(`^${id}-[a-z2-7]{16}@bounces\\.loop\\.example$`));

  const html = String((await simpleParser(kept.raw)).html);
  const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!);
  expect(links).toEqual([expect.stringMatching(/^https:\/\/mail\.platform\.test\/t\/c\/[\w-]+\.[\w-]+$/)]);
  expect(html).toMatch(/<img src="https:\/\/mail\.platform\.test\/t\/o\/[\w-]+\.[\w-]+"/);
  expect(html).not.toContain("shop.example");

  // The signature covers the message as received, rewritten links and all.
  const [signatures] = await dkimpy([kept.raw], dns.address);
  expect(signatures!.map((s) => [s.domain, s.algorithm, s.result, s.detail])).toEqual([
    [DOMAIN, "rsa-sha256", "pass", ""],
  ]);

  // PUBLIC_URL is the API process behind a proxy: its path, asked of the API.
  const follow = (path: string) =>
    fetch(`${stack.apiUrls[0]}${path}`, { headers: { "User-Agent": BROWSER }, redirect: "manual" });
  const link = new URL(links[0]!).pathname;
  const clicked = await follow(link);
  expect([clicked.status, clicked.headers.get("location")]).toEqual([302, original]);

  // An altered token leads nowhere: another URL under the same MAC, or the MAC changed.
  const [payload, mac] = link.slice("/t/c/".length).split(".") as [string, string];
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString()) as unknown[];
  const evil = Buffer.from(JSON.stringify([...claims.slice(0, -1), "https://evil.example/"])).toString("base64url");
  const flipped = `${mac.startsWith("A") ? "B" : "A"}${mac.slice(1)}`;
  for (const path of [`/t/c/${evil}.${mac}`, `/t/c/${payload}.${flipped}`]) {
    const res = await follow(path);
    expect({ path, status: res.status, location: res.headers.get("location") }).toEqual({
      path,
      status: 404,
      location: null,
    });
  }
}, 120_000);
