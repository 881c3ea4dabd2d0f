// The send peer: what a user would otherwise build instead of the accept path, in one process.
// A Bun.serve that answers POST /api/v1/emails: the Bearer token against a static map (token ->
// organization and its verified sending domain, from the file the harness writes; every
// organization is enterprise); the client IP's and the organization's rate-limiter-flexible
// limiters on Redis (as the admission peer, peer-server.ts); the API's own request validation
// (its OpenAPI body check and parseSendRequest, in the process); the From domain; then the
// recipient guards and the bounce cooldown in one Lua script (the same windows as the accept
// step: 5 sends per mailbox in any 10 minutes, 20 in any 24 hours, fixtures not counted), and
// an XADD of the message to a stream of its lane. Redis is expected to run with appendfsync
// always, as the service's does. It answers 202 with the API's body and its 8 rate-limit
// headers, or the API's refusals. No Idempotency-Key (the benchmark sends none).
// Usage: SEND_PEER_PORT=<port> REDIS_URL=<url> SEND_PEER_TOKENS=<file of "<token> <domain>" lines> bun run loadtest/send-peer.ts
import { readFileSync } from "node:fs";
import { apiContracts } from "../internal/api/contract";
import { InvalidField } from "../internal/api/invalid_field";
import { parseSendRequest } from "../internal/api/send_request";
import { Lane } from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { newMessageId } from "../internal/mail/identity";
import { domainOf, fixtureKind, GUARD_LIMITS, laneName, normalizeMailbox } from "../internal/mail/policy";
import { MAX_BODY_BYTES } from "../internal/limits/limits";
import { JSON_TYPE, peerLimits } from "./peer-limits";

const port = Number(process.env.SEND_PEER_PORT ?? "0");
/** token -> [organization, its verified domain] */
const senders = new Map(
  readFileSync(process.env.SEND_PEER_TOKENS!, "utf8")
    .split("\n")
    .filter((l) => l.includes(" "))
    .map((l) => {
      const [token, domain] = l.split(" ") as [string, string];
      return [token, { org: domain, domain }] as const;
    }),
);
const checkBody = apiContracts().get("POST /api/v1/emails")!.body;

const { redis, admit } = await peerLimits(process.env.REDIS_URL!);

// KEYS[1] the (organization, mailbox) log of accepted sends  KEYS[2] the mailbox's bounce cooldown
// ARGV now, message id, count (1/0), short max, short window, long max, long window
// Reply: 0 when counted (or not counted), or the milliseconds to wait.
redis.defineCommand("guards", {
  numberOfKeys: 2,
  lua: `
local now = tonumber(ARGV[1])
local cooldown = tonumber(redis.call('GET', KEYS[2]) or '0')
if cooldown > now then return cooldown - now end
if ARGV[3] ~= '1' then return 0 end
local shortMax, shortWin, longMax, longWin = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - longWin)
if redis.call('ZCOUNT', KEYS[1], '(' .. (now - shortWin), '+inf') >= shortMax then return shortWin end
if redis.call('ZCARD', KEYS[1]) >= longMax then return longWin end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], longWin)
return 0`,
});
const guards = (redis as unknown as { guards(...a: (string | number)[]): Promise<number> }).guards.bind(redis);

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { ...headers, ...JSON_TYPE } });

async function send(req: Request): Promise<Response> {
  const auth = req.headers.get("authorization");
  const sender = auth?.startsWith("Bearer ") ? senders.get(auth.slice(7)) : undefined;
  if (sender === undefined) return json(401, { code: "INVALID_TOKEN" });
  const ip = req.headers.get("x-forwarded-for")?.split(",").pop()?.trim() ?? "";
  const admission = await admit(ip, sender.org);
  if (!admission.ok) return admission.refusal;
  const { headers } = admission;

  if (!/^application\/json\s*(;|$)/i.test(req.headers.get("content-type") ?? ""))
    return json(415, { code: "UNSUPPORTED_MEDIA_TYPE" }, headers);
  const raw = await req.arrayBuffer();
  if (raw.byteLength > MAX_BODY_BYTES) return json(413, { code: "PAYLOAD_TOO_LARGE" }, headers);
  let input: ReturnType<typeof parseSendRequest>;
  try {
    const body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw)) as unknown;
    checkBody(body);
    input = parseSendRequest(body);
  } catch (err) {
    if (err instanceof InvalidField)
      return json(422, { code: "VALIDATION_FAILED", message: err.message, field: err.field }, headers);
    return json(400, { code: "INVALID_JSON" }, headers);
  }
  const { email, lane } = input;
  if (domainOf(email.fromAddress) !== sender.domain) return json(403, { code: "DOMAIN_NOT_VERIFIED" }, headers);

  const id = newMessageId();
  const now = Date.now();
  const mailbox = normalizeMailbox(email.toAddress);
  const transactional = lane === Lane.TRANSACTIONAL;
  const count = transactional && fixtureKind(email.toAddress) === undefined;
  const wait = transactional
    ? await guards(
        `peer-guard:${sender.org}:${mailbox}`,
        `peer-cooldown:${mailbox}`,
        now,
        id,
        count ? 1 : 0,
        GUARD_LIMITS.shortMax,
        GUARD_LIMITS.shortWindowMs,
        GUARD_LIMITS.longMax,
        GUARD_LIMITS.longWindowMs,
      )
    : 0;
  if (wait > 0)
    return json(
      429,
      { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." },
      { ...headers, "Retry-After": String(Math.ceil(wait / 1000)) },
    );
  await redis.xadd(`peer-mail:${laneName(lane)}`, "*", "id", id, "org", sender.org, "email", JSON.stringify(email));
  return json(202, { id, status: "queued", lane: laneName(lane) }, headers);
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  routes: {
    "/api/v1/emails": { POST: send },
    "/healthz": new Response('{"status":"ok"}', { headers: JSON_TYPE }),
  },
  fetch: () => json(404, { code: "NOT_FOUND" }),
  error: (err) => json(503, { code: "UNAVAILABLE", message: err.message }),
});
console.log(`send-peer listening on http://127.0.0.1:${server.port} (${senders.size} tokens)`);

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));
