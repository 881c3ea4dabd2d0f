// The suppression list through the real HTTP API and the daemon's real RPCs: an address added,
// listed by reason with a cursor, removed; a send to a listed address refused at once (on both
// lanes, whatever its case or +tag), and accepted again once it is removed; another
// organization's list is its own.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { HotStore } from "../hotstore/hotstore";
import { hotStoreServers, hotStores, SUITE_POLICY } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`suppression list through the API (${name} store)`, () => {
    let store: HotStore;
    let svc: InProcess;
    const tokens: Record<string, string> = {};

    beforeAll(async () => {
      store = await open();
      svc = await startInProcess(store, new ManualClock(Date.UTC(2026, 10, 1, 8)), SUITE_POLICY);
      for (const slug of ["acme", "other"]) tokens[slug] = (await svc.sender(slug, Plan.PREMIUM)).token;
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    async function call(slug: string, method: string, path: string, body?: unknown) {
      const res = await fetch(`${svc.apiUrl}${path}`, {
        method,
        headers: { Authorization: `Bearer ${tokens[slug]}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
    }
    const send = (slug: string, to: string, extra: object = {}) =>
      call(slug, "POST", "/api/v1/emails", { from: `hi@${slug}.example`, to, subject: "s", text: "t", ...extra });

    test("a listed address: refused at once with 422 RECIPIENT_SUPPRESSED, on both lanes; removed, sent to again", async () => {
      const added = await call("acme", "POST", "/api/v1/suppressions", { email: "Gone@Example.org", detail: "asked" });
      expect(added).toEqual({
        status: 201,
        body: {
          email: "gone@example.org",
          reason: "manual",
          detail: "asked",
          messageId: null,
          createdAt: expect.any(String),
        },
      });
      expect((await call("acme", "POST", "/api/v1/suppressions", { email: "gone@example.org" })).status).toBe(200);
      for (const to of ["gone@example.org", "GONE+promo@example.org", "Gone <gone@example.org>"]) {
        for (const extra of [{}, { lane: "bulk" }]) {
          const refused = await send("acme", to, extra);
          expect({ to, ...refused }).toEqual({
            to,
            status: 422,
            body: {
              code: "RECIPIENT_SUPPRESSED",
              message: expect.stringContaining("is on this organization's suppression list (manual)"),
            },
          });
        }
      }
      // Another organization's list is its own.
      expect((await send("other", "gone@example.org")).status).toBe(202);
      expect((await call("other", "GET", "/api/v1/suppressions")).body).toEqual({ data: [], nextCursor: null });
      expect((await call("other", "DELETE", "/api/v1/suppressions/gone@example.org")).status).toBe(404);

      expect(
        (await call("acme", "DELETE", `/api/v1/suppressions/${encodeURIComponent("GONE@example.org")}`)).status,
      ).toBe(204);
      expect((await call("acme", "DELETE", "/api/v1/suppressions/gone@example.org")).status).toBe(404);
      expect((await send("acme", "gone@example.org")).status).toBe(202);
    });

    test("listed by reason, newest first, with a cursor; bad input is 422", async () => {
      for (const i of [1, 2, 3])
        expect((await call("acme", "POST", "/api/v1/suppressions", { email: `p${i}@example.org` })).status).toBe(201);
      const first = await call("acme", "GET", "/api/v1/suppressions?reason=manual&limit=2");
      expect((first.body!.data as { email: string }[]).map((s) => s.email)).toEqual([
        "p3@example.org",
        "p2@example.org",
      ]);
      const next = await call(
        "acme",
        "GET",
        `/api/v1/suppressions?reason=manual&limit=2&cursor=${first.body!.nextCursor}`,
      );
      expect(next.body).toEqual({ data: [expect.objectContaining({ email: "p1@example.org" })], nextCursor: null });
      expect((await call("acme", "GET", "/api/v1/suppressions?reason=complaint")).body).toEqual({
        data: [],
        nextCursor: null,
      });
      for (const [path, body] of [
        ["/api/v1/suppressions?reason=bored", undefined],
        ["/api/v1/suppressions?limit=0", undefined],
      ] as const)
        expect({ path, status: (await call("acme", "GET", path, body)).status }).toEqual({ path, status: 422 });
      for (const body of [{ email: "not an address" }, { email: "a@b.cd", extra: 1 }, {}])
        expect((await call("acme", "POST", "/api/v1/suppressions", body)).status).toBe(422);
    });
  });
}
