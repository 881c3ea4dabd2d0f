import { describe, expect, test } from "bun:test";
import { runToEnd } from "../testkit/testkit";
import { apiConfig, ConfigError, limiterdConfig } from "./config";

describe("configuration", () => {
  test("defaults", () => {
    expect(apiConfig({})).toMatchObject({ host: "127.0.0.1", port: 8080, limiterUrl: "http://127.0.0.1:7070", limiterTimeoutMs: 1_000, trustProxy: [], docsUrl: undefined });
    expect(limiterdConfig({})).toMatchObject({ port: 7070, redisUrl: undefined, host: "127.0.0.1" });
  });

  test.each([
    [{ API_PORT: "abc" }, "API_PORT=\"abc\" is not a whole number from 1 to 65535"],
    [{ API_PORT: "70000" }, "API_PORT"],
    [{ LIMITER_URL: "grpc://x" }, "LIMITER_URL=\"grpc://x\" must use http://"],
    [{ TRUST_PROXY: "10.0.0.1, proxy.local" }, "TRUST_PROXY holds \"proxy.local\""],
    [{ DOCS_URL: "not a url" }, "DOCS_URL"],
    [{ LIMITER_TIMEOUT_MS: "0" }, "LIMITER_TIMEOUT_MS"],
    [{ API_HOST: "everywhere" }, "API_HOST"],
  ])("api rejects %p", (env, message) => {
    expect(() => apiConfig(env)).toThrow(ConfigError);
    expect(() => apiConfig(env)).toThrow(message);
  });

  test("limiterd rejects a non-Redis REDIS_URL", () => {
    expect(() => limiterdConfig({ REDIS_URL: "http://localhost:6379" })).toThrow("REDIS_URL=\"http://localhost:6379\" must use redis:// or rediss://");
  });

  test.each([
    ["cmd/api/index.ts", { API_PORT: "eighty" }, "api: configuration error: API_PORT"],
    ["cmd/limiterd/index.ts", { LIMITER_PORT: "-1" }, "limiterd: configuration error: LIMITER_PORT"],
    ["cmd/admin/index.ts", { LIMITER_URL: "nope" }, "admin: configuration error: LIMITER_URL"],
    ["cmd/dev/index.ts", { API_PORT: "0" }, "dev: configuration error: API_PORT"],
  ])("%s stops with one line and exit code 2", async (entry, env, line) => {
    const r = await runToEnd(entry, [], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toStartWith(line);
  });
});
