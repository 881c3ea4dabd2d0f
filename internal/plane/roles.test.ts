// Every RPC of every service in proto/ has a role, read from the generated descriptors, so an
// RPC added later without one fails here (and is refused to everyone by the daemon); the
// operators' role table in docs/operations-tls.md is checked against the same map.
import { expect, test } from "bun:test";
import type { DescFile } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import type { PeerCertificate } from "node:tls";
import { join } from "node:path";
import { REPO_ROOT } from "../testkit/testkit";
import { RPC_ACCESS, RPC_ROLES, TICKET_RPCS } from "./roles";
import { peerOf } from "./tls";

async function generatedRpcs(): Promise<string[]> {
  const gen = join(REPO_ROOT, "internal/gen");
  const paths: string[] = [];
  for await (const file of new Bun.Glob("**/*_pb.ts").scan(gen)) {
    for (const value of Object.values(await import(join(gen, file)))) {
      if ((value as DescFile | undefined)?.kind !== "file") continue;
      for (const service of (value as DescFile).services)
        for (const method of service.methods) paths.push(`/${service.typeName}/${method.name}`);
    }
  }
  return paths.sort();
}

test("every RPC in proto/ has exactly one role, and the table names no RPC that does not exist", async () => {
  const rpcs = await generatedRpcs();
  expect(rpcs.length).toBeGreaterThan(50);
  expect(rpcs.filter((path) => !RPC_ROLES.has(path))).toEqual([]);
  expect([...RPC_ROLES.keys()].sort()).toEqual(rpcs);
});

test("every RPC says where its organization comes from; a ticket's RPCs are the API front's", async () => {
  const rpcs = await generatedRpcs();
  const tenancies = ["ticket", "tickets", "session", "secret", "operator", "none"];
  for (const path of rpcs) expect([path, tenancies.includes(RPC_ACCESS.get(path)!.tenancy)]).toEqual([path, true]);
  for (const path of TICKET_RPCS) expect([path, RPC_ACCESS.get(path)!.role]).toEqual([path, "front"]);
  // The SMTP front's role has the token check and nothing else.
  expect([...RPC_ACCESS].filter(([, a]) => a.role === "smtp").map(([p]) => p)).toEqual([
    "/mailcore.limiter.v1.DirectoryService/VerifyToken",
  ]);
  expect(TICKET_RPCS.has("/mailcore.limiter.v1.MailService/ListMessages")).toBe(true);
  expect(TICKET_RPCS.has("/mailcore.limiter.v1.AudienceService/ListSubscribers")).toBe(true);
  // The API's sends, coalesced: a ticket per send (send_batch_service.test.ts).
  expect(RPC_ACCESS.get("/mailcore.limiter.v1.SendBatchService/SendBatch")).toEqual({
    role: "front",
    tenancy: "tickets",
  });
});

test("the roles of a handful of RPCs, as the operators' guide lists them", () => {
  expect(RPC_ROLES.get("/mailcore.limiter.v1.LimiterService/AdmitBatch")).toBe("front");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.DirectoryService/VerifyToken")).toBe("smtp");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.DirectoryService/CreateToken")).toBe("admin");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.ConsoleService/CreateUser")).toBe("admin");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.ConsoleService/SignIn")).toBe("front");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.DeliveryService/Lease")).toBe("worker");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.WebhookDeliveryService/ReportWebhookAttempts")).toBe("worker");
  expect(RPC_ROLES.get("/mailcore.limiter.v1.LaneService/GetLanes")).toBe("admin");
});

/** The role table of docs/operations-tls.md ("| Service | Role | RPCs |") as RPC path -> role; a service without a package is mailcore.limiter.v1's. */
function documentedRoles(): Map<string, string> {
  const lines = readFileSync(join(REPO_ROOT, "docs/operations-tls.md"), "utf8").split("\n");
  const header = lines.indexOf("| Service | Role | RPCs |");
  expect(header).toBeGreaterThan(-1);
  const roles = new Map<string, string>();
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    const [service, role, rpcs] = line
      .split("|")
      .slice(1, 4)
      .map((cell) => cell.trim());
    const typeName = service!.includes(".") ? service! : `mailcore.limiter.v1.${service}`;
    // A cell may end with a note in parentheses: "Check, Watch (the API's `/readyz` asks it)".
    for (const rpc of rpcs!.replace(/\(.*\)/, "").split(",")) {
      const path = `/${typeName}/${rpc.trim()}`;
      expect(roles.has(path)).toBe(false);
      roles.set(path, role!);
    }
  }
  return roles;
}

test("the role table in docs/operations-tls.md is RPC_ROLES, both ways", () => {
  const documented = documentedRoles();
  const sorted = (m: ReadonlyMap<string, string>) => [...m].map(([path, role]) => `${path} ${role}`).sort();
  expect(sorted(documented)).toEqual(sorted(RPC_ROLES));
});

test("a certificate's roles are its role URI SANs; other names are not roles", () => {
  const peer = peerOf({
    subject: { CN: "mailcore front" },
    subjectaltname:
      "DNS:urn:mailcore:role:admin, URI:urn:mailcore:role:front, URI:urn:mailcore:role:root, URI:urn:mailcore:role:worker",
  } as unknown as PeerCertificate);
  expect([...peer.roles].sort()).toEqual(["front", "worker"]);
  expect(peer.subject).toBe("CN=mailcore front");
});
