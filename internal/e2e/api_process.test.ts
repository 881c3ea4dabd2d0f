// End to end over separate processes: limiterd and API processes started with `bun run`,
// on a redis-server this file starts or on the embedded store, talked to over real HTTP.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  freePort,
  type RedisServer,
  runBun,
  type Stack,
  startRedis,
  startStack,
  tempDir,
  waitFor,
  waitHttpOk,
} from "../testkit/testkit";

const TOO_MANY = { message: "Too many requests" };

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

async function get(url: string, token?: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, { headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith("{") ? JSON.parse(text) : { text } };
}

/** Sends n requests at once, spread over the given APIs, and times the whole burst. */
async function burst(apiUrls: string[], token: string, n: number) {
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => get(`${apiUrls[i % apiUrls.length]}/api/v1/tags`, token)),
  );
  return { answers, elapsedMs: performance.now() - started };
}

/** Checks a free organization's burst of 300: exactly 100 plus what refilled while it ran. */
function expectFreeBurst({ answers, elapsedMs }: { answers: Answer[]; elapsedMs: number }) {
  const ok = answers.filter((a) => a.status === 200);
  const limited = answers.filter((a) => a.status === 429);
  // One token comes back every 600 ms; the burst may outlast that (the test measures it).
  const refilled = Math.floor(elapsedMs / 600);
  expect(ok.length).toBeGreaterThanOrEqual(100);
  expect(ok.length).toBeLessThanOrEqual(100 + refilled);
  expect(ok.length + limited.length).toBe(answers.length);
  // Every admitted request saw a different remaining count, from 99 down.
  const remaining = ok.map((a) => Number(a.headers.get("RateLimit-Remaining"))).sort((x, y) => y - x);
  expect(new Set(remaining.slice(0, 100)).size).toBe(100);
  expect(remaining[0]).toBe(99);
  for (const a of ok) {
    expect(a.body).toEqual({ data: [] });
    expect(a.headers.get("RateLimit-Policy")).toBe('"free";q=100;w=60');
  }
  for (const a of limited) {
    expect(a.body).toEqual({
      ...TOO_MANY,
      docs: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/docs\/rate-limits$/),
    });
    const retry = Number(a.headers.get("Retry-After"));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(a.headers.get("RateLimit-Remaining")).toBe("0");
    const reset = a.headers.get("RateLimit-Reset")!;
    expect(a.headers.get("RateLimit")).toBe(`"free";r=0;t=${reset}`);
    expect(a.headers.get("X-RateLimit-Remaining")).toBe("0");
    expect(a.headers.get("X-RateLimit-Reset")).toBe(reset);
    expect(Number(reset)).toBeGreaterThanOrEqual(retry);
    expect(Number(reset)).toBeLessThanOrEqual(60);
  }
  return { ok: ok.length, refilled };
}

describe("two API processes and one daemon on Redis", () => {
  let redis: RedisServer;
  let stack: Stack;
  beforeAll(async () => {
    redis = await startRedis();
    stack = await startStack({ redisUrl: redis.url, apis: 2 });
  }, 30_000); // four processes on a busy machine
  afterAll(async () => {
    await stack?.stop();
    await redis?.stop();
  });

  test("300 concurrent requests of one free organization: exactly 100 admitted", async () => {
    const token = await stack.org("burst-redis", "free");
    const result = expectFreeBurst(await burst(stack.apiUrls, token, 300));
    console.log(`redis, 2 APIs: ${result.ok} admitted of 300 (refill allowance ${result.refilled})`);
  });

  test("GET /api/v1/tags answers the organization's tags and their subscriber counts, read with the admission", async () => {
    const token = await stack.org("tagged", "premium");
    const post = (path: string, body: unknown) =>
      fetch(`${stack.apiUrls[0]}${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await post("/api/v1/tags", { name: "welcome" })).status).toBe(201);
    expect((await post("/api/v1/subscribers", { email: "ann@tagged.example", tags: ["billing"] })).status).toBe(201);
    const a = await get(`${stack.apiUrls[1]}/api/v1/tags`, token);
    expect(a.status).toBe(200);
    expect(a.body).toEqual({
      data: [
        { name: "billing", subscribers: 1 },
        { name: "welcome", subscribers: 0 },
      ],
    });
    // Three requests so far; the bucket refills at 700 a minute meanwhile.
    expect(a.headers.get("RateLimit")).toMatch(/^"premium";r=69[789];t=1$/);
  });

  test("a plan change and a revocation take effect on the next request", async () => {
    const token = await stack.org("changes", "free");
    expect((await get(`${stack.apiUrls[0]}/api/v1/tags`, token)).headers.get("RateLimit")).toBe('"free";r=99;t=1');
    expect((await stack.admin("org", "set-plan", "changes", "premium")).code).toBe(0);
    const upgraded = await get(`${stack.apiUrls[1]}/api/v1/tags`, token);
    expect(upgraded.headers.get("RateLimit-Policy")).toBe('"premium";q=700;w=60');
    expect(upgraded.headers.get("RateLimit-Limit")).toBe("700");
    expect((await stack.admin("token", "revoke", token)).code).toBe(0);
    for (const api of stack.apiUrls) {
      const revoked = await get(`${api}/api/v1/tags`, token);
      expect(revoked.status).toBe(401);
      expect(revoked.body.code).toBe("INVALID_TOKEN");
      expect(revoked.headers.get("RateLimit")).toBe('"free";r=100;t=0');
    }
  });
});

describe("one API process and the embedded store", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  test("300 concurrent requests of one free organization: exactly 100 admitted", async () => {
    const token = await stack.org("burst-embedded", "free");
    const result = expectFreeBurst(await burst(stack.apiUrls, token, 300));
    console.log(`embedded, 1 API: ${result.ok} admitted of 300 (refill allowance ${result.refilled})`);
  });

  test("bad credentials: 401 with the minimum policy's headers", async () => {
    const url = `${stack.apiUrls[0]}/api/v1/tags`;
    const cases: [Record<string, string>, string][] = [
      [{}, "MISSING_TOKEN"],
      [{ Authorization: "Basic dXNlcjpwYXNz" }, "INVALID_AUTHORIZATION"],
      [{ Authorization: "Bearer" }, "INVALID_AUTHORIZATION"],
      [{ Authorization: "Bearer not-a-token" }, "INVALID_TOKEN"],
      [{ Authorization: `Bearer mc_${"A".repeat(43)}` }, "INVALID_TOKEN"],
      [{ Authorization: `Bearer mc_${"A".repeat(4000)}` }, "INVALID_TOKEN"],
    ];
    for (const [headers, code] of cases) {
      const a = await get(url, undefined, headers);
      expect(a.status).toBe(401);
      expect(a.body).toEqual({ code, message: expect.any(String) });
      expect(a.headers.get("WWW-Authenticate")).toBe('Bearer realm="api"');
      expect(a.headers.get("RateLimit-Policy")).toBe('"free";q=100;w=60');
      expect(a.headers.get("RateLimit")).toBe('"free";r=100;t=0');
      expect(a.headers.get("X-RateLimit-Limit")).toBe("100");
    }
  });

  test("unknown paths and methods", async () => {
    const token = await stack.org("routes", "enterprise");
    const missing = await get(`${stack.apiUrls[0]}/api/v1/nope`, token);
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe("NOT_FOUND");
    expect(missing.headers.get("RateLimit-Policy")).toBe('"enterprise";q=2000;w=60');
    const wrong = await fetch(`${stack.apiUrls[0]}/api/v1/tags`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("Allow")).toBe("GET, HEAD, POST");
    expect(((await wrong.json()) as { code: string }).code).toBe("METHOD_NOT_ALLOWED");
    // The health and document paths are GET alone as well, and HEAD is GET's answer without the body.
    for (const path of ["/healthz", "/readyz", "/api/v1/openapi.json", "/docs", "/docs/rate-limits"]) {
      for (const method of ["TRACE", "POST", "PUT", "DELETE", "OPTIONS"]) {
        const res = await fetch(`${stack.apiUrls[0]}${path}`, { method });
        expect({ path, method, status: res.status, allow: res.headers.get("Allow") }).toEqual({
          path,
          method,
          status: 405,
          allow: "GET, HEAD",
        });
      }
    }
    // The console's pages say HEAD too where they serve GET.
    const consolePage = await fetch(`${stack.apiUrls[0]}/console/sign-in`, { method: "PUT" });
    expect({ status: consolePage.status, allow: consolePage.headers.get("Allow") }).toEqual({
      status: 405,
      allow: "GET, HEAD, POST",
    });
    const head = await fetch(`${stack.apiUrls[0]}/api/v1/tags`, {
      method: "HEAD",
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(head.status).toBe(200);
    expect(head.headers.get("Content-Type")).toBe("application/json");
    expect(head.headers.get("RateLimit-Policy")).toBe('"enterprise";q=2000;w=60');
    expect(await head.text()).toBe("");
  });

  test("oversized headers are refused and the process keeps serving", async () => {
    const res = await fetch(`${stack.apiUrls[0]}/api/v1/tags`, { headers: { "X-Filler": "x".repeat(64 * 1024) } });
    expect(res.status).toBe(431);
    expect((await get(`${stack.apiUrls[0]}/healthz`)).status).toBe(200);
  });

  test("the rate-limit docs page is served where the 429 body points", async () => {
    const res = await fetch(`${stack.apiUrls[0]}/docs/rate-limits`);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toContain("text/html");
    const page = await res.text();
    expect(page).toContain("<h1>Rate limits</h1>");
    expect(page).toContain("Retry-After");
    // Readable on a phone, in the site's style, with a way back to the reference.
    expect(page).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(page).toContain('<link rel="stylesheet" href="/assets/site.css">');
    expect(page).toContain('<a href="/docs">');
  });

  test("the IP limit: 500 per second per client IP, others unaffected", async () => {
    const url = `${stack.apiUrls[0]}/api/v1/tags`;
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 700 }, () => get(url)));
    const elapsedMs = performance.now() - started;
    const unauthenticated = answers.filter((a) => a.status === 401).length;
    const limited = answers.filter((a) => a.status === 429);
    // 500 at once, plus one every 2 ms while the burst ran.
    expect(unauthenticated).toBeGreaterThanOrEqual(500);
    expect(unauthenticated).toBeLessThanOrEqual(500 + Math.floor(elapsedMs / 2));
    expect(unauthenticated + limited.length).toBe(700);
    expect(limited.length).toBeGreaterThan(0);
    for (const a of limited) {
      expect(a.body.message).toBe("Too many requests");
      expect(a.headers.get("Retry-After")).toBe("1");
    }
  });
});

describe("trusted proxies", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { TRUST_PROXY: "127.0.0.1", DOCS_URL: "https://docs.example.com/rate-limits" } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  test("X-Forwarded-For from a trusted proxy names the client; each client has its own IP bucket", async () => {
    const url = `${stack.apiUrls[0]}/api/v1/tags`;
    const from = (ip: string) => get(url, undefined, { "X-Forwarded-For": ip });
    const first = await Promise.all(Array.from({ length: 800 }, () => from("198.51.100.1")));
    const limited = first.filter((a) => a.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]!.body).toEqual({ ...TOO_MANY, docs: "https://docs.example.com/rate-limits" });
    expect((await from("198.51.100.2")).status).toBe(401);
  });
});

describe("the daemon is down", () => {
  test("the API answers 503 quickly and recovers by itself when the daemon is back", async () => {
    const dataDir = tempDir();
    const limiterPort = await freePort();
    const apiPort = await freePort();
    const env = {
      DATA_DIR: dataDir,
      LIMITER_URL: `http://127.0.0.1:${limiterPort}`,
      LIMITER_PORT: String(limiterPort),
      API_PORT: String(apiPort),
    };
    const api = runBun("cmd/api/index.ts", [], env);
    let limiterd: ReturnType<typeof runBun> | undefined;
    try {
      const base = `http://127.0.0.1:${apiPort}`;
      await waitHttpOk(`${base}/healthz`);
      const started = performance.now();
      const down = await get(`${base}/api/v1/tags`, `mc_${"B".repeat(43)}`);
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(down.status).toBe(503);
      expect(down.body).toEqual({ code: "LIMITER_UNAVAILABLE", message: expect.any(String) });
      expect(down.headers.get("Retry-After")).toBe("1");
      expect((await get(`${base}/readyz`)).status).toBe(503);

      limiterd = runBun("cmd/limiterd/index.ts", [], env);
      await waitFor("the API to recover", async () => (await get(`${base}/api/v1/tags`)).status === 401, 10_000);

      // And down again: still fails closed, never admits.
      await limiterd.stop("SIGKILL");
      const again = await get(`${base}/api/v1/tags`);
      expect(again.status).toBe(503);
    } finally {
      await api.stop("SIGKILL");
      await limiterd?.stop("SIGKILL");
    }
  });
});
