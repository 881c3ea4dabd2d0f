// Open and click tracking through the real API, the daemon's real lease stream and a real
// worker composing into the file sink: a send with tracking gets the 1x1 pixel and its links
// rewritten (the unsubscribe one left alone) as it is leased; the pixel and the redirects are
// served at PUBLIC_URL/t/, a redirect only to a link that was in the message (an altered or
// made-up token is 404, never an open redirect); each hit is counted as a person's or a
// machine's, apart, in the stats, and announced as email.opened / email.clicked with `machine`.
// A send without tracking is not touched.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { simpleParser } from "mailparser";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { HotStore } from "../hotstore/hotstore";
import { logger } from "../log/log";
import { hotStoreServers, hotStores, releaseNext, SUITE_POLICY } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { tempDir } from "../testkit/testkit";
import { AckJournal } from "../worker/acks";
import { FileSink } from "../worker/transport";
import { Worker } from "../worker/worker";

const BROWSER =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15";
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`tracking (${name} store)`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let svc: InProcess;
    let token: string;
    let orgId: string;
    const sink = tempDir();

    beforeAll(async () => {
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
      svc = await startInProcess(store, clock, SUITE_POLICY, 60_000);
      await svc.clients.directory.createOrganization({ slug: "acme", plan: Plan.ENTERPRISE });
      await svc.clients.directory.addDomain({ slug: "acme", domain: "acme.example", verified: true });
      token = (await svc.clients.directory.createToken({ slug: "acme" })).token;
      orgId = (await svc.clients.directory.getOrganization({ slug: "acme" })).organization!.id;
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${svc.apiUrl}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    /** A hit on a /t/ URL (PUBLIC_URL is the in-process API's stand-in, http://127.0.0.1:8080). */
    const hit = (url: string, userAgent: string) =>
      fetch(`${svc.apiUrl}${new URL(url).pathname}`, { headers: { "User-Agent": userAgent }, redirect: "manual" });

    /** Sends, lets a real worker lease and compose it into the sink, and writes its history to the records. */
    async function delivered(body: Record<string, unknown>) {
      const sent = await call("POST", "/api/v1/emails", { from: "Acme <hi@acme.example>", subject: "s", ...body });
      expect(sent.status).toBe(202);
      const id = sent.body.id as string;
      while (await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs()));
      const worker = new Worker(svc.clients.delivery, new FileSink(sink), {
        workerId: "test",
        maxInFlight: 4,
        log: logger("worker"),
        acks: new AckJournal(tempDir()),
      });
      const running = worker.run();
      for (let i = 0; i < 300 && (await store.mail.getMessage(orgId, id))?.status !== 3; i++) await Bun.sleep(10);
      await worker.stop();
      await running;
      // The records writer does not run here: the history is written as it would.
      await svc.records.history.write([(await store.mail.getMessage(orgId, id))!]);
      const parsed = await simpleParser(readFileSync(join(sink, `${id}.eml`)));
      return { id, html: String(parsed.html) };
    }

    test("the pixel and the links rewritten as the message is leased; redirects only to its links; people and machines apart", async () => {
      await call("POST", "/api/v1/webhooks", {
        url: "https://hooks.acme.example/t",
        events: ["email.opened", "email.clicked"],
      });
      const { id, html } = await delivered({
        to: "kim@example.org",
        html: '<p>Hi <a href="https://acme.example/offer?a=1&amp;b=2">the offer</a>, <a href="mailto:x@acme.example">mail</a> and <a href="https://acme.example/docs">docs</a></p>',
        tracking: { opens: true, clicks: true },
      });
      const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!);
      expect(links).toEqual([
        expect.stringMatching(/^http:\/\/127\.0\.0\.1:8080\/t\/c\/[\w-]+\.[\w-]+$/),
        "mailto:x@acme.example",
        expect.stringMatching(/^http:\/\/127\.0\.0\.1:8080\/t\/c\/[\w-]+\.[\w-]+$/),
      ]);
      const pixel = /<img src="(http:\/\/127\.0\.0\.1:8080\/t\/o\/[^"]+)"/.exec(html)?.[1];
      expect(pixel).toBeDefined();

      // Within 2 s of delivery: a machine's (a gateway scanning it), whatever its user agent.
      const early = await hit(links[0]!, BROWSER);
      expect([early.status, early.headers.get("location")]).toEqual([302, "https://acme.example/offer?a=1&b=2"]);
      clock.advance(60_000);
      expect((await hit(links[0]!, BROWSER)).status).toBe(302); // a person
      clock.advance(5_000);
      expect((await hit(links[2]!, "curl/8.5.0")).headers.get("location")).toBe("https://acme.example/docs"); // a scanner
      const opened = await hit(pixel!, "Mozilla/5.0"); // Apple Mail Privacy Protection
      expect([opened.status, opened.headers.get("content-type")]).toEqual([200, "image/gif"]);
      expect(
        Buffer.from(await opened.arrayBuffer())
          .subarray(0, 6)
          .toString(),
      ).toBe("GIF89a");
      clock.advance(60_000);
      expect((await hit(pixel!, BROWSER)).status).toBe(200); // a person

      // Never an open redirect: a token altered or made up leads nowhere.
      const [payload, mac] = new URL(links[0]!).pathname.slice("/t/c/".length).split(".");
      const other = Buffer.from(JSON.stringify([1, "c", id, 0, 2, "https://evil.example/"])).toString("base64url");
      for (const path of [
        `/t/c/${other}.${mac}`,
        `/t/c/${payload}.${mac!.slice(0, -2)}AA`,
        "/t/c/nothing",
        "/t/x/a.b",
      ]) {
        const res = await fetch(`${svc.apiUrl}${path}`, { redirect: "manual" });
        expect({ path, status: res.status, location: res.headers.get("location") }).toEqual({
          path,
          status: 404,
          location: null,
        });
      }

      const stats = (await call("GET", "/api/v1/stats/emails?since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z"))
        .body.data as {
        opened: { human: number; machine: number };
        clicked: { human: number; machine: number };
      }[];
      const sum = (k: "opened" | "clicked", w: "human" | "machine") => stats.reduce((n, r) => n + r[k][w], 0);
      expect([
        sum("opened", "human"),
        sum("opened", "machine"),
        sum("clicked", "human"),
        sum("clicked", "machine"),
      ]).toEqual([1, 1, 1, 2]);
      // The events, as the webhooks get them (oldest first).
      const events = (
        await svc.records.db.run(
          (sql) => sql`SELECT payload FROM webhook_deliveries WHERE event_type IN ('email.opened', 'email.clicked')`,
        )
      )
        .map(
          (r: { payload: string }) =>
            JSON.parse(r.payload) as { type: string; timestamp: string; data: { machine: boolean; reason: string } },
        )
        .sort((a: { timestamp: string }, b: { timestamp: string }) => a.timestamp.localeCompare(b.timestamp))
        .map((e: { type: string; data: { machine: boolean; reason: string } }) => [
          e.type,
          e.data.machine,
          e.data.reason,
        ]);
      expect(events).toEqual([
        ["email.clicked", true, "too-soon-after-delivery"],
        ["email.clicked", false, "person"],
        ["email.clicked", true, "scanner-user-agent"],
        ["email.opened", true, "apple-privacy-proxy"],
        ["email.opened", false, "person"],
      ]);
    });

    test("a send without tracking is left as written", async () => {
      const { html } = await delivered({
        to: "lee@example.org",
        html: '<p><a href="https://acme.example/x">x</a></p>',
      });
      expect(html).toContain('href="https://acme.example/x"');
      expect(html).not.toContain("/t/o/");
    });
  });
}
