// The peer: what a user would otherwise build instead of the full path. A Bun.serve that
// authenticates the Bearer token against a static map (token -> organization, from a JSON
// file the harness writes; every organization is enterprise), then consumes from two
// rate-limiter-flexible RateLimiterRedis limiters on the same redis-server: the client IP's
// (500 per 1 s, key: X-Forwarded-For) and the organization's (2000 per 60 s). It answers
// GET /api/v1/tags with the API's body and its 8 rate-limit headers, computed from the
// organization limiter's result, or 429. Unlike the API it fetches no tags: the body is static.
// Usage: PEER_PORT=<port> REDIS_URL=<url> PEER_TOKENS=<json file> bun run loadtest/peer-server.ts (SIGHUP: read the file again)
import { readFileSync } from "node:fs";
import { JSON_TYPE, peerLimits } from "./peer-limits";

const port = Number(process.env.PEER_PORT ?? "0");
const loadTokens = () =>
  new Map(Object.entries(JSON.parse(readFileSync(process.env.PEER_TOKENS!, "utf8")) as Record<string, string>));
let orgs = loadTokens();
// The harness may add organizations after a warm-up; it rewrites the file and says so.
process.on("SIGHUP", () => {
  orgs = loadTokens();
});
const BODY = '{"data":[]}';
const { admit } = await peerLimits(process.env.REDIS_URL!);

async function tags(req: Request): Promise<Response> {
  const auth = req.headers.get("authorization");
  const org = auth?.startsWith("Bearer ") ? orgs.get(auth.slice(7)) : undefined;
  if (org === undefined) return new Response('{"code":"INVALID_TOKEN"}', { status: 401, headers: JSON_TYPE });
  // The harness is the only client and acts as the proxy: its X-Forwarded-For is the client.
  const ip = req.headers.get("x-forwarded-for")?.split(",").pop()?.trim() ?? "";
  const admission = await admit(ip, org);
  return admission.ok ? new Response(BODY, { headers: { ...admission.headers, ...JSON_TYPE } }) : admission.refusal;
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  routes: {
    "/api/v1/tags": { GET: tags },
    "/healthz": new Response('{"status":"ok"}', { headers: JSON_TYPE }),
  },
  fetch: () => new Response('{"code":"NOT_FOUND"}', { status: 404, headers: JSON_TYPE }),
  error: (err) =>
    new Response(JSON.stringify({ code: "UNAVAILABLE", message: err.message }), { status: 503, headers: JSON_TYPE }),
});
console.log(`peer-server listening on http://127.0.0.1:${server.port} (${orgs.size} tokens)`);

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));
