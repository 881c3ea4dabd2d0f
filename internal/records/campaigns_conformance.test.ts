// The campaign records, one suite on a SQLite file and on a PostgreSQL server this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import { type NewCampaign, pending } from "./campaigns";
import type { MessageHistory } from "../model/history";
import type { Records } from "./records";

const databases = recordDatabases("campaigns");

const T0 = Date.UTC(2026, 10, 1);
const draft = (over: Partial<NewCampaign> = {}): NewCampaign => ({
  name: "November news",
  from: "News <news@acme.example>",
  fromAddress: "news@acme.example",
  subject: "Hello {{subscriber.name}}",
  html: "<p>Hi</p>",
  text: "Hi",
  audienceTags: [],
  ...over,
});

function message(id: string, status: MessageStatus, lane = Lane.BULK): MessageHistory {
  return {
    id,
    orgId: "x",
    lane,
    from: "",
    to: "",
    toMailbox: "",
    subject: "",
    tags: [],
    status,
    attempts: 1,
    createdMs: T0,
    updatedMs: T0,
    version: 1,
    events: [],
  };
}

for (const [name, fresh] of databases) {
  describe(`campaign records: ${name}`, () => {
    let r: Records;
    let org: string;
    let other: string;
    beforeAll(async () => {
      ({ r, org, other } = await recordsWithTwoOrgs(fresh, "cmp", T0));
      const people = Array.from({ length: 10 }, (_, i) => ({
        email: `p${i}@list.example`,
        name: `P${i}`,
        tags: i % 2 === 0 ? ["even"] : ["odd"],
        triggerWorkflows: false,
      }));
      await r.audience.upsertMany(org, people, T0);
      await r.audience.update(org, "p2@list.example", { status: "unsubscribed", triggerWorkflows: false }, T0);
      await r.audience.upsertMany(other, [{ email: "p0@list.example", triggerWorkflows: false }], T0);
    });
    afterAll(async () => {
      await r?.close();
    });

    test("a draft is created, read, listed newest first, and is another organization's to nobody", async () => {
      const a = await r.campaigns.create(org, draft({ name: "a" }), T0);
      const b = await r.campaigns.create(org, draft({ name: "b", audienceTags: ["even"] }), T0 + 1);
      expect(a).toMatchObject({
        id: expect.stringMatching(/^cmp_[0-9a-f]{24}$/),
        status: "draft",
        scheduledMs: null,
        stats: { recipients: 0, queued: 0, skipped: 0 },
      });
      expect(await r.campaigns.get(org, b.id)).toEqual(b);
      expect(await r.campaigns.get(other, b.id)).toBeUndefined();
      const first = await r.campaigns.list(org, 1);
      expect(first.data.map((c) => c.name)).toEqual(["b"]);
      const second = await r.campaigns.list(org, 1, first.nextCursor!);
      expect(second.data.map((c) => c.name)).toEqual(["a"]);
      expect((await r.campaigns.list(other, 10)).data).toEqual([]);
    });

    test("sending fixes and counts the audience; the walk skips the unsubscribed and the bounced; a page is reserved once; outcomes count once", async () => {
      const c = await r.campaigns.create(org, draft({ audienceTags: ["even"] }), T0);
      const sent = await r.campaigns.send(org, c.id, undefined, T0 + 10);
      expect(sent).toMatchObject({ status: "sending", stats: { recipients: 5 } });
      expect(await r.campaigns.send(org, c.id, undefined, T0 + 10)).toBe("not_draft");
      // Someone added after the start is not in this campaign.
      await r.audience.upsert(org, { email: "late@list.example", tags: ["even"], triggerWorkflows: false }, T0 + 11);
      // p4 bounced before.
      const p4 = (await r.audience.get(org, "p4@list.example"))!;
      await r.audience.recordMessageEvents([
        {
          ...message("msg_b", MessageStatus.BOUNCED),
          orgId: org,
          to: p4.email,
          events: [{ status: MessageStatus.BOUNCED, atMs: T0, detail: "" }],
        },
      ]);

      const [running] = (await r.campaigns.sending()).filter((x) => x.id === c.id);
      const members = await r.campaigns.nextMembers(running!, 100);
      expect(members.map((m) => [m.email, m.skip])).toEqual([
        ["p0@list.example", false],
        ["p2@list.example", true],
        ["p4@list.example", true],
        ["p6@list.example", false],
        ["p8@list.example", false],
      ]);
      const send = members.filter((m) => !m.skip);
      const wanted = send.map((m, i) => ({ subscriberId: m.id, messageId: `msg_${i}`, token: `tok_${c.id}_${i}` }));
      const reserved = await r.campaigns.reserve(running!, wanted);
      const again = await r.campaigns.reserve(
        running!,
        wanted.map((w) => ({ ...w, messageId: `${w.messageId}_x`, token: `${w.token}_x` })),
      );
      expect(again).toEqual(reserved);
      expect(reserved.get(send[0]!.id)).toEqual(wanted[0]!);
      expect(await r.campaigns.tokenOwner(wanted[1]!.token)).toEqual({
        orgId: org,
        subscriberId: send[1]!.id,
        campaignId: c.id,
      });
      expect(await r.campaigns.tokenOwner("nope")).toBeUndefined();

      await r.campaigns.advance(running!, members.at(-1)!.seq, 3, 2, false, T0 + 20, 1);
      await r.campaigns.advance(running!, members.at(-1)!.seq, 3, 2, false, T0 + 21, 1); // the same page again: counted once
      const advanced = (await r.campaigns.get(org, c.id))!;
      expect(advanced.stats).toEqual({
        recipients: 5,
        queued: 3,
        delivered: 0,
        bounced: 0,
        failed: 0,
        skipped: 2,
        suppressed: 1,
      });
      expect(pending(advanced)).toBe(3);
      expect(await r.campaigns.nextMembers(advanced, 100)).toEqual([]);

      const outcomes = [
        message("msg_0", MessageStatus.DELIVERED),
        message("msg_1", MessageStatus.BOUNCED),
        message("msg_2", MessageStatus.QUEUED),
        message("msg_9", MessageStatus.DELIVERED),
      ];
      await r.campaigns.recordOutcomes(outcomes);
      await r.campaigns.recordOutcomes(outcomes);
      await r.campaigns.recordOutcomes([message("msg_2", MessageStatus.FAILED, Lane.TRANSACTIONAL)]);
      expect((await r.campaigns.get(org, c.id))!.stats).toEqual({
        recipients: 5,
        queued: 3,
        delivered: 1,
        bounced: 1,
        failed: 0,
        skipped: 2,
        suppressed: 1,
      });

      await r.campaigns.advance(advanced, members.at(-1)!.seq, 0, 0, true, T0 + 30);
      expect((await r.campaigns.get(org, c.id))!.status).toBe("sent");
      expect(await r.campaigns.cancel(org, c.id, T0 + 31)).toBe("finished");
    });

    test("a scheduled campaign starts when due; a cancelled one never advances", async () => {
      const c = await r.campaigns.create(org, draft(), T0);
      expect(await r.campaigns.send(org, c.id, T0 + 1_000, T0)).toMatchObject({
        status: "scheduled",
        scheduledMs: T0 + 1_000,
      });
      await r.campaigns.startDue(T0 + 999);
      expect((await r.campaigns.get(org, c.id))!.status).toBe("scheduled");
      await r.campaigns.startDue(T0 + 1_000);
      const started = (await r.campaigns.get(org, c.id))!;
      expect(started.status).toBe("sending");
      expect(started.stats.recipients).toBe(11);
      expect(await r.campaigns.cancel(other, c.id, T0 + 2_000)).toBeUndefined();
      expect(await r.campaigns.cancel(org, c.id, T0 + 2_000)).toMatchObject({ status: "cancelled" });
      await r.campaigns.advance(started, 5, 5, 0, false, T0 + 2_001);
      expect((await r.campaigns.get(org, c.id))!).toMatchObject({
        status: "cancelled",
        cursorSeq: 0,
        stats: { queued: 0 },
      });
      expect((await r.campaigns.sending()).map((x) => x.id)).not.toContain(c.id);
    });
  });
}
