// A webhook's request goes to the address its host was checked at, over real processes
// (limiterd, an API, a worker) and a DNS server of the test's own. A name that answers a public
// address and then 127.0.0.1 in turn: the worker reaches the public address (through an HTTP
// proxy this test runs, which stands for the Internet and records where each request was sent)
// and never connects to 127.0.0.1, where a receiver waits. And over TLS the pinned request still
// names its host: the receiver sees the URL's name as SNI and Host.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { generate } from "selfsigned";
import { type DnsServer, startDnsServer } from "../testkit/dns";
import { getJson, sendEmail, type Stack, startStack, tempDir, waitFor } from "../testkit/testkit";

/** A public address as the check sees it; the proxy answers for it, so nothing leaves this host. */
const PUBLIC = "198.51.99.7";

interface Attempt {
  statusCode: number | null;
  error: string | null;
}

/** Listens on 127.0.0.1:0; resolves with the port. */
const listen = (server: HttpServer | TcpServer) =>
  new Promise<number>((done) => server.listen(0, "127.0.0.1", () => done((server.address() as { port: number }).port)));

let stack: Stack;
let dns: DnsServer;
/** Where a request that reached 127.0.0.1 would land: it counts connections and answers 200. */
let inside: TcpServer;
let insidePort: number;
let insideConnections = 0;
/** The proxy: each request's target and Host, answered 503 (so the delivery is tried again). */
let proxy: HttpServer;
let proxyPort: number;
const proxied: { target: string; host: string }[] = [];

beforeAll(async () => {
  dns = await startDnsServer();
  inside = createTcpServer((socket) => {
    insideConnections++;
    socket.end("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  });
  insidePort = await listen(inside);
  proxy = createHttpServer((req: IncomingMessage, res) => {
    proxied.push({ target: req.url ?? "", host: req.headers.host ?? "" });
    req.resume();
    res.writeHead(503).end("the Internet is elsewhere");
  });
  proxyPort = await listen(proxy);
  stack = await startStack({ env: { WEBHOOK_SCHEDULE_DIVISOR: "1000" } });
});
afterAll(async () => {
  await stack?.stop();
  await dns?.stop();
  inside?.close();
  proxy?.close();
});

async function webhookTo(token: string, url: string): Promise<string> {
  const res = await fetch(`${stack.apiUrls[0]}/api/v1/webhooks`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ url, events: ["email.queued"] }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function attemptsOf(token: string, webhookId: string): Promise<Attempt[]> {
  const got = await getJson(`${stack.apiUrls[0]}/api/v1/webhooks/${webhookId}/deliveries`, token);
  return ((got.body.data as { attempts: Attempt[] }[])[0]?.attempts ?? []) as Attempt[];
}

const queueOne = (token: string, slug: string) =>
  sendEmail(stack.apiUrls[0]!, token, {
    from: `Hooks <no-reply@${slug}.example>`,
    to: "delivered@fixtures.test",
    subject: "An event",
    text: "Hello",
  });

test("a name that answers a public address, then 127.0.0.1: the worker connects to the public one, never to 127.0.0.1", async () => {
  dns.setAddresses("hooks.flip.test", "A", [[PUBLIC], ["127.0.0.1"]]);
  const worker = stack.startWorker({
    DNS_SERVER: dns.address,
    HTTP_PROXY: `http://127.0.0.1:${proxyPort}`,
    NO_PROXY: "",
    WEBHOOK_ALLOW_PRIVATE_URLS: "0",
  });
  const token = await stack.org("flip", "free");
  const webhookId = await webhookTo(token, `http://hooks.flip.test:${insidePort}/hook`);
  expect((await queueOne(token, "flip")).status).toBe(202);
  await waitFor("four attempts", async () => (await attemptsOf(token, webhookId)).length >= 4, 30_000);
  await worker.stop();

  const attempts = await attemptsOf(token, webhookId);
  const refused = `refused: hooks.flip.test is a private address (127.0.0.1)`;
  // Each attempt looked the name up once, and went where that lookup was checked: the public
  // address (the proxy's 503), or nowhere (127.0.0.1 refused).
  expect(attempts.slice(0, 4).map((a) => a.statusCode ?? a.error)).toEqual([503, refused, 503, refused]);
  expect(dns.questions("hooks.flip.test", "A")).toBe(attempts.length);
  expect(proxied.length).toBeGreaterThanOrEqual(2);
  for (const p of proxied)
    expect(p).toEqual({ target: `http://${PUBLIC}:${insidePort}/hook`, host: `hooks.flip.test:${insidePort}` });
  expect(insideConnections).toBe(0);
});

test("over TLS, the request pinned to the checked address names its host: SNI and Host are the URL's", async () => {
  const pems = await generate([{ name: "commonName", value: "hooks.tls.test" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    extensions: [{ name: "subjectAltName", altNames: [{ type: 2, value: "hooks.tls.test" }] }],
  });
  const ca = join(tempDir(), "receiver.pem");
  writeFileSync(ca, pems.cert);
  const seen: { serverName: string; host: string }[] = [];
  const receiver = createHttpsServer({ cert: pems.cert, key: pems.private }, (req, res) => {
    seen.push({ serverName: String((req.socket as TLSSocket).servername), host: req.headers.host ?? "" });
    req.resume();
    res.writeHead(200).end();
  });
  const port = await listen(receiver);
  dns.setAddresses("hooks.tls.test", "A", [["127.0.0.1"]]);
  // This worker may reach loopback (the receiver is there) and trusts the receiver's certificate.
  const worker = stack.startWorker({
    DNS_SERVER: dns.address,
    WEBHOOK_ALLOW_PRIVATE_URLS: "1",
    NODE_EXTRA_CA_CERTS: ca,
    HTTP_PROXY: "",
    HTTPS_PROXY: "",
  });
  try {
    const token = await stack.org("tls", "free");
    const webhookId = await webhookTo(token, `https://hooks.tls.test:${port}/hook`);
    expect((await queueOne(token, "tls")).status).toBe(202);
    await waitFor("the delivery", async () => (await attemptsOf(token, webhookId)).length >= 1, 30_000);
    expect((await attemptsOf(token, webhookId))[0]).toMatchObject({ statusCode: 200, error: null });
    expect(seen).toEqual([{ serverName: "hooks.tls.test", host: `hooks.tls.test:${port}` }]);
  } finally {
    await worker.stop();
    receiver.close();
  }
});
