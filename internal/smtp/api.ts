// The SMTP front's one call to the HTTP API: POST /api/v1/emails with the session's token.
import type { ApiAnswer } from "./replies";

export interface Forward {
  token: string;
  /** The body, as message.ts serialised it (the Idempotency-Key is derived from these bytes). */
  json: string;
  idempotencyKey: string | undefined;
  /** The SMTP client's address, for the API's per-IP limit when it trusts this front (TRUST_PROXY). */
  clientIp: string;
  /** Sent as X-Request-Id, so the API, limiterd and the worker log the message under this front's id. */
  requestId: string;
}

export interface ApiClient {
  /** Never rejects: a failure to get an answer is an ApiAnswer too. */
  send(f: Forward): Promise<ApiAnswer>;
}

const KEPT_HEADERS = ["retry-after", "ratelimit-policy", "ratelimit-remaining", "idempotent-replayed"];

export function apiClient(baseUrl: string, timeoutMs: number): ApiClient {
  const url = new URL("/api/v1/emails", baseUrl).toString();
  return {
    async send(f) {
      const headers: Record<string, string> = {
        Authorization: `Bearer ${f.token}`,
        "Content-Type": "application/json",
        "User-Agent": "mailcore-smtp",
        "X-Request-Id": f.requestId,
        ...(f.clientIp ? { "X-Forwarded-For": f.clientIp } : {}),
        ...(f.idempotencyKey ? { "Idempotency-Key": f.idempotencyKey } : {}),
      };
      let res: Response;
      let text: string;
      try {
        res = await fetch(url, { method: "POST", headers, body: f.json, signal: AbortSignal.timeout(timeoutMs) });
        text = await res.text();
      } catch (err) {
        const e = err as Error & { code?: string };
        if (e.name === "TimeoutError" || e.name === "AbortError") return { kind: "timeout", afterMs: timeoutMs };
        return {
          kind: "unreachable",
          reason:
            e.code === "ConnectionRefused" || e.code === "ECONNREFUSED" ? "connection refused" : (e.code ?? e.message),
        };
      }
      let body: unknown;
      try {
        body = text.startsWith("{") ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      const kept: Record<string, string | undefined> = {};
      for (const h of KEPT_HEADERS) kept[h] = res.headers.get(h) ?? undefined;
      return { kind: "http", status: res.status, body, headers: kept };
    },
  };
}
