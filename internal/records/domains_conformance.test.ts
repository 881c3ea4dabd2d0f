// Sending domains and their DKIM keys on both databases: an id each, keys added with the
// domain, a name verified by one organization refused to another, a check's promotion of a
// rotation's key (the old one retired), removal, and the pages of sealed keys a start opens.
import { afterAll, describe, expect, test } from "bun:test";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import type { NewDkimKey } from "./domains";
import type { Records } from "./records";

const databases = recordDatabases("domains");
const T0 = Date.UTC(2026, 10, 1);

const key = (selector: string, state: NewDkimKey["state"], algorithm: NewDkimKey["algorithm"] = "rsa-sha256") => ({
  selector,
  algorithm,
  publicKey: `pub-${selector}`,
  sealedKey: `dkimseal1.sealed-${selector}`,
  state,
});

for (const [name, fresh] of databases) {
  describe(`domain records: ${name}`, () => {
    let r: Records;
    afterAll(async () => {
      await r?.close();
    });

    test("a domain with its keys; listed, found by id and by name; the other organization sees none of it", async () => {
      const made = await recordsWithTwoOrgs(fresh, "dom", T0);
      r = made.r;
      const added = await r.domains.add({
        id: "dom_a1",
        orgId: made.org,
        name: "mail.example.com",
        verifyValue: "v1",
        keys: [key("mc202611a", "active"), key("mc202611a-ed", "active", "ed25519-sha256")],
        nowMs: T0,
      });
      expect(added).toMatchObject({ id: "dom_a1", name: "mail.example.com", verified: false, checked: null });
      expect(added.keys.map((k) => [k.selector, k.algorithm, k.state])).toEqual([
        ["mc202611a", "rsa-sha256", "active"],
        ["mc202611a-ed", "ed25519-sha256", "active"],
      ]);
      expect((await r.domains.list(made.org)).map((d) => d.id)).toEqual(["dom_a1"]);
      expect((await r.domains.byName(made.org, "mail.example.com"))?.id).toBe("dom_a1");
      expect(await r.domains.get(made.other, "dom_a1")).toBeUndefined();
      expect(await r.domains.list(made.other)).toEqual([]);
      expect(await r.domains.keys(made.other, "mail.example.com")).toEqual([]);
      await expect(
        r.domains.add({
          id: "dom_a2",
          orgId: made.org,
          name: "mail.example.com",
          verifyValue: "v",
          keys: [],
          nowMs: T0,
        }),
      ).rejects.toThrow("already a sending domain of this organization");

      // Verified here: the other organization may not add it, nor verify it.
      const check = {
        records: [{ purpose: "verification" }],
        grant: true,
        nextMs: T0 + 100,
        dkimFailing: false,
        promote: [],
      };
      expect(await r.domains.saveCheck(made.org, "dom_a1", check, T0 + 1)).toEqual({ wasVerified: false });
      expect((await r.directory.orgProjection(made.org))!.verifiedDomains).toEqual(["mail.example.com"]);
      await expect(
        r.domains.add({
          id: "dom_b1",
          orgId: made.other,
          name: "mail.example.com",
          verifyValue: "v",
          keys: [],
          nowMs: T0,
        }),
      ).rejects.toThrow("verified by another organization");
      const got = await r.domains.get(made.org, "dom_a1");
      expect(got).toMatchObject({ verified: true, checked: [{ purpose: "verification" }], checkedMs: T0 + 1 });
      // A later check that does not grant (a record gone) never takes the right to send back.
      await r.domains.saveCheck(
        made.org,
        "dom_a1",
        { records: [], grant: false, nextMs: T0 + 100, dkimFailing: true, promote: [] },
        T0 + 2,
      );
      expect(await r.domains.countDkimFailing()).toBe(1);
      expect(await r.domains.get(made.org, "dom_a1")).toMatchObject({ verified: true, checked: [], checkedMs: T0 + 2 });
    });

    test("a rotation: the pending key promoted by a check, the active one of its algorithm retired; old retired keys dropped", async () => {
      const org = (await r.directory.getOrganization("dom")).id;
      await r.domains.addKeys(org, "mail.example.com", [key("mc202611b", "pending")], T0 + 2);
      // A selector it has already is left as it is.
      await r.domains.addKeys(org, "mail.example.com", [key("mc202611b", "active")], T0 + 2);
      const states = async () =>
        Object.fromEntries((await r.domains.keys(org, "mail.example.com")).map((k) => [k.selector, k.state]));
      expect(await states()).toEqual({ mc202611a: "active", "mc202611a-ed": "active", mc202611b: "pending" });
      await r.domains.saveCheck(
        org,
        "dom_a1",
        { records: [], grant: true, nextMs: T0 + 100, dkimFailing: false, promote: ["mc202611b"] },
        T0 + 3,
      );
      expect(await states()).toEqual({ mc202611a: "retired", "mc202611a-ed": "active", mc202611b: "active" });
      const retired = (await r.domains.keys(org, "mail.example.com")).find((k) => k.selector === "mc202611a")!;
      expect(retired.changedMs).toBe(T0 + 3);
      await r.domains.dropRetired(org, "mail.example.com", T0 + 3);
      expect(Object.keys(await states())).toHaveLength(3);
      await r.domains.dropRetired(org, "mail.example.com", T0 + 4);
      expect(await states()).toEqual({ "mc202611a-ed": "active", mc202611b: "active" });
    });

    test("the sealed keys a start opens come a page at a time, each once", async () => {
      const org = (await r.directory.getOrganization("dom")).id;
      await r.domains.add({
        id: "dom_a3",
        orgId: org,
        name: "b.example.com",
        verifyValue: "v3",
        keys: [key("s1", "active"), key("s2", "pending"), key("s3", "retired")],
        nowMs: T0,
      });
      const seen: string[] = [];
      let after: [string, string, string] | undefined;
      for (;;) {
        const page = await r.domains.sealedKeys(after, 2);
        seen.push(...page.map((k) => `${k.domain}/${k.selector}`));
        if (page.length < 2) break;
        const last = page.at(-1)!;
        after = [last.orgId, last.domain, last.selector];
      }
      expect(seen.sort()).toEqual(
        [
          "b.example.com/s1",
          "b.example.com/s2",
          "b.example.com/s3",
          "mail.example.com/mc202611a-ed",
          "mail.example.com/mc202611b",
        ].sort(),
      );
    });

    test("removal takes the keys with the domain; a check not yet made is due, a recent one not", async () => {
      const org = (await r.directory.getOrganization("dom")).id;
      // dom_a3 was never checked; dom_a1's next check is at T0 + 100.
      expect((await r.domains.due(T0 + 99, 10)).map((d) => d.id)).toEqual(["dom_a3"]);
      expect((await r.domains.due(T0 + 100, 10)).map((d) => d.id)).toEqual(["dom_a3", "dom_a1"]);
      await r.domains.postpone(org, "dom_a3", T0 + 200);
      expect((await r.domains.due(T0 + 199, 10)).map((d) => d.id)).toEqual(["dom_a1"]);
      expect((await r.domains.get(org, "dom_a3"))!.checkedMs).toBeNull();
      const removed = await r.domains.remove(org, "dom_a1");
      expect(removed.name).toBe("mail.example.com");
      expect(await r.domains.keys(org, "mail.example.com")).toEqual([]);
      expect((await r.directory.orgProjection(org))!.verifiedDomains).toEqual([]);
      await expect(r.domains.remove(org, "dom_a1")).rejects.toThrow("no sending domain");
    });
  });
}
