// The ceiling: a bare Bun.serve answering GET /api/v1/tags with the API's body and its 8
// rate-limit headers as static strings, no admission and no daemon behind it.
// Usage: BARE_PORT=<port> bun run loadtest/bare-server.ts
const port = Number(process.env.BARE_PORT ?? "0");
const BODY = '{"data":[]}';
const HEADERS = {
  "RateLimit-Policy": '"enterprise";q=2000;w=60',
  RateLimit: '"enterprise";r=1999;t=1',
  "RateLimit-Limit": "2000",
  "RateLimit-Remaining": "1999",
  "RateLimit-Reset": "1",
  "X-RateLimit-Limit": "2000",
  "X-RateLimit-Remaining": "1999",
  "X-RateLimit-Reset": "1",
  "Content-Type": "application/json",
};

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  fetch(req) {
    const url = req.url;
    const start = url.indexOf("/", url.indexOf("//") + 2);
    const query = url.indexOf("?", start);
    const path = url.slice(start, query < 0 ? undefined : query);
    if (path === "/api/v1/tags" && req.method === "GET") return new Response(BODY, { headers: HEADERS });
    if (path === "/healthz")
      return new Response('{"status":"ok"}', { headers: { "Content-Type": "application/json" } });
    return new Response('{"code":"NOT_FOUND"}', { status: 404, headers: { "Content-Type": "application/json" } });
  },
});
console.log(`bare-server listening on http://127.0.0.1:${server.port}`);

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));
