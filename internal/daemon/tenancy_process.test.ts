// One tenant's front reaches no other tenant: every organization-scoped RPC, called by a valid
// certificate of each role with another organization's id in the request, is refused unless it
// carries a valid admission ticket; the ticket's organization is the only one it acts for.
// limiterd on mutual TLS, as on several hosts; the RPCs come from the generated descriptors,
// so one added later is called here too.
import {
  create,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
  type MessageShape,
} from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { limiterTls } from "../config/config";
import { readMasterKeyFile } from "../dkim/seal";
import { AudienceService } from "../gen/mailcore/limiter/v1/audience_pb";
import { MailService } from "../gen/mailcore/limiter/v1/mail_pb";
import { SuppressionService } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { limiterTransport } from "../limiterclient/transport";
import { initCerts } from "../plane/certs";
import { RPC_ACCESS, TICKET_RPCS } from "../plane/roles";
import type { ClientCredential } from "../plane/secret";
import { ROLES, type Role } from "../plane/tls";
import { clientTlsEnv, REPO_ROOT, type Stack, sendEmail, startStack, tempDir, waitFor } from "../testkit/testkit";
import { DomainService } from "../gen/mailcore/limiter/v1/domains_pb";
import { TICKET_HEADER } from "../wire/metadata";
import { TICKET_TTL_MS, Tickets } from "./tickets";

let certs: string;
let stack: Stack;
let alpha: { id: string; token: string; ticket: string };
let beta: { id: string; token: string; ticket: string };

const as = (role: Role): ClientCredential => ({ tls: limiterTls(clientTlsEnv(certs, role), stack.limiterUrl)! });
const clientOf = <S extends DescService>(service: S, role: Role) =>
  createClient(service, limiterTransport(stack.limiterUrl, as(role)));

/** Every service of the generated code, by its full name. */
async function services(): Promise<Map<string, DescService>> {
  const out = new Map<string, DescService>();
  const gen = join(REPO_ROOT, "internal/gen");
  for await (const file of new Bun.Glob("**/*_pb.ts").scan(gen))
    for (const value of Object.values(await import(join(gen, file))))
      if ((value as DescFile | undefined)?.kind === "file")
        for (const s of (value as DescFile).services) out.set(s.typeName, s);
  return out;
}

/** A request, empty but for another organization's id as field 1, where org_id was. */
function withOrgId<D extends DescMessage>(schema: D, orgId: string): MessageShape<D> {
  const data = new BinaryWriter().string(orgId).finish();
  const message = create(schema);
  message.$unknown = [{ no: 1, wireType: WireType.LengthDelimited, data }];
  return message;
}

/** "answered", or the code of the refusal. */
async function outcome(call: Promise<unknown>): Promise<string> {
  return call.then(
    () => "answered",
    (err) => Code[ConnectError.from(err).code]!,
  );
}

/** Calls one unary RPC as `role` with the request and metadata given. */
function call(service: DescService, method: DescMethod, role: Role, request: unknown, headers: Record<string, string>) {
  const client = createClient(service, limiterTransport(stack.limiterUrl, as(role))) as unknown as Record<
    string,
    (req: unknown, o: object) => Promise<unknown>
  >;
  return client[method.localName]!(request, { headers, timeoutMs: 10_000 });
}

async function organization(slug: string) {
  const token = await stack.org(slug, "enterprise");
  const directory = createClient(
    (await services()).get("mailcore.limiter.v1.DirectoryService")!,
    limiterTransport(stack.limiterUrl, as("admin")),
  ) as unknown as { getOrganization(r: { slug: string }): Promise<{ organization: { id: string } }> };
  const { id } = (await directory.getOrganization({ slug })).organization;
  const admitBatch = (await import("../limiterclient/admit")).admitBatchCaller(stack.limiterUrl, as("front"));
  const [admission] = await admitBatch([{ token, clientIp: "192.0.2.7", withTags: false }], 10_000);
  admitBatch.close();
  return { id, token, ticket: admission!.ticket };
}

beforeAll(async () => {
  certs = tempDir();
  await initCerts(certs, []);
  stack = await startStack({ certs, workers: 0 });
  [alpha, beta] = [await organization("alpha"), await organization("beta")];
}, 60_000);
afterAll(() => stack?.stop());

test("no request of the fronts names an organization; the operator's name one by slug", async () => {
  const all = await services();
  const rpcs = [...all.values()].flatMap((s) => s.methods.map((m) => ({ path: `/${s.typeName}/${m.name}`, m })));
  for (const { path, m } of rpcs) {
    // No request names an organization by id but a worker's ack, whose lease names it; the
    // operator's name one by slug.
    const fields = m.input.fields.map((f) => f.name);
    if (fields.includes("org_id")) expect([path, RPC_ACCESS.get(path)?.role]).toEqual([path, "worker"]);
    if (fields.includes("slug")) expect([path, RPC_ACCESS.get(path)?.tenancy]).toEqual([path, "operator"]);
  }
  expect(TICKET_RPCS.size).toBeGreaterThanOrEqual(30);
});

describe("every organization-scoped RPC, as each role, with another organization's id", () => {
  test("refused without a valid ticket of that organization; refused to every role but the front's", async () => {
    const key = readMasterKeyFile(join(stack.dataDir, "dkim-master.key")).derive("plane-ticket");
    const expired = new Tickets(key, () => Date.now() - TICKET_TTL_MS - 1_000).issue(beta.id);
    const [, expiresS, mac] = alpha.ticket.split(".").slice(-3);
    // Alpha's ticket with beta's id put in: its MAC does not check.
    const forged = `${beta.id}.${expiresS}.${mac}`;
    const made = new Tickets(Buffer.alloc(32, 7), Date.now).issue(beta.id);
    const cases: [string, Record<string, string>][] = [
      ["no ticket", {}],
      ["an expired ticket", { [TICKET_HEADER]: expired }],
      ["alpha's ticket with beta's id", { [TICKET_HEADER]: forged }],
      ["a ticket under another key", { [TICKET_HEADER]: made }],
      ["not a ticket", { [TICKET_HEADER]: beta.id }],
    ];
    const all = await services();
    const outcomes: string[] = [];
    for (const path of [...TICKET_RPCS].sort()) {
      const [, typeName, name] = path.split("/");
      const service = all.get(typeName!)!;
      const method = service.methods.find((m) => m.name === name)!;
      const request = withOrgId(method.input, beta.id);
      for (const role of ROLES) {
        if (role !== "front") {
          // Even beta's own valid ticket does not open an RPC of another role.
          outcomes.push(
            `${path} ${role} beta's ticket: ${await outcome(call(service, method, role, request, { [TICKET_HEADER]: beta.ticket }))}`,
          );
          continue;
        }
        for (const [label, headers] of cases)
          outcomes.push(`${path} ${role} ${label}: ${await outcome(call(service, method, role, request, headers))}`);
      }
    }
    const refused = (line: string) =>
      line.endsWith(line.includes(" front ") ? ": Unauthenticated" : ": PermissionDenied");
    expect(outcomes.filter((line) => !refused(line))).toEqual([]);
    expect(outcomes.length).toBe(TICKET_RPCS.size * (5 + ROLES.length - 1));
    await waitFor("the refusals in the log", async () => stack.limiterd.stderr().includes("no valid admission ticket"));
    for (const reason of ["missing", "expired", "forged", "malformed"])
      expect(stack.limiterd.stderr()).toContain(`"ticket":"${reason}"`);
  }, 120_000);

  test("every RPC of a console session, with a session that is not one, is refused", async () => {
    const all = await services();
    const sessionRpcs = [...RPC_ACCESS].filter(([, a]) => a.tenancy === "session").map(([path]) => path);
    expect(sessionRpcs.length).toBeGreaterThanOrEqual(5);
    const outcomes: string[] = [];
    for (const path of sessionRpcs) {
      const [, typeName, name] = path.split("/");
      const service = all.get(typeName!)!;
      const method = service.methods.find((m) => m.name === name)!;
      const request = create(method.input, { sessionToken: `mcs_${"A".repeat(43)}` } as never);
      // Beta's ticket does not stand in for a session.
      const headers = { [TICKET_HEADER]: beta.ticket };
      outcomes.push(`${path}: ${await outcome(call(service, method, "front", request, headers))}`);
    }
    expect(outcomes.filter((line) => !line.endsWith(": Unauthenticated"))).toEqual([]);
  }, 60_000);

  test("with a valid ticket, the call acts for the ticket's organization, whatever id the request carries", async () => {
    // Beta has a subscriber and a message; alpha has neither.
    const ticketed = (ticket: string) => ({ headers: { [TICKET_HEADER]: ticket }, timeoutMs: 10_000 });
    await clientOf(AudienceService, "front").upsertSubscribers(
      { subscribers: [{ email: "kim@beta.example" }] },
      ticketed(beta.ticket),
    );
    const sent = await sendEmail(stack.apiUrls[0]!, beta.token, {
      from: "hi@beta.example",
      to: "kim@example.org",
      subject: "for beta",
      text: "t",
    });
    expect(sent.status).toBe(202);
    const audience = clientOf(AudienceService, "front");
    const mail = clientOf(MailService, "front");
    const list = { ...withOrgId(AudienceService.method.listSubscribers.input, beta.id), limit: 10 };
    const messages = MailService.method.listMessages.input;
    // The control: beta's ticket sees beta's subscriber and message.
    expect((await audience.listSubscribers(list, ticketed(beta.ticket))).subscribers).toHaveLength(1);
    await waitFor(
      "beta's message in the log",
      async () => (await mail.listMessages(withOrgId(messages, beta.id), ticketed(beta.ticket))).messages.length === 1,
    );
    // Alpha's ticket with beta's id in the request: alpha's (empty) lists.
    expect((await audience.listSubscribers(list, ticketed(alpha.ticket))).subscribers).toEqual([]);
    expect((await mail.listMessages(withOrgId(messages, beta.id), ticketed(alpha.ticket))).messages).toEqual([]);
    const messageId = sent.body.id as string;
    expect(await outcome(mail.getMessage({ messageId }, ticketed(alpha.ticket)))).toBe("NotFound");
    expect(await outcome(mail.getMessage({ messageId }, ticketed(beta.ticket)))).toBe("answered");
    // Beta's sending domain: listed, read, rotated or removed by beta's ticket only.
    const domains = clientOf(DomainService, "front");
    const [betaDomain] = (await domains.listSendingDomains({}, ticketed(beta.ticket))).domains;
    expect(betaDomain?.name).toBe("beta.example");
    expect((await domains.listSendingDomains({}, ticketed(alpha.ticket))).domains.map((d) => d.name)).toEqual([
      "alpha.example",
    ]);
    const domainId = betaDomain!.id;
    for (const rpc of ["getDomain", "checkDomain", "rotateDkimKey", "deleteDomain"] as const)
      expect(`${rpc}: ${await outcome(domains[rpc]({ domainId }, ticketed(alpha.ticket)))}`).toBe(`${rpc}: NotFound`);
    expect(await outcome(domains.getDomain({ domainId }, ticketed(beta.ticket)))).toBe("answered");
    // Beta verified nothing, but alpha cannot add beta's domain twice to itself nor see it.
    expect(await outcome(domains.createDomain({ name: "beta.example" }, ticketed(alpha.ticket)))).toBe("AlreadyExists");
    // Beta's suppression list: alpha's ticket neither reads nor removes it.
    const suppressions = clientOf(SuppressionService, "front");
    await suppressions.addSuppression({ email: "gone@example.org" }, ticketed(beta.ticket));
    const listSuppressions = withOrgId(SuppressionService.method.listSuppressions.input, beta.id);
    expect((await suppressions.listSuppressions(listSuppressions, ticketed(beta.ticket))).suppressions).toHaveLength(1);
    expect((await suppressions.listSuppressions(listSuppressions, ticketed(alpha.ticket))).suppressions).toEqual([]);
    const remove = {
      ...withOrgId(SuppressionService.method.deleteSuppression.input, beta.id),
      email: "gone@example.org",
    };
    expect(await outcome(suppressions.deleteSuppression(remove, ticketed(alpha.ticket)))).toBe("NotFound");
    expect(await outcome(suppressions.deleteSuppression(remove, ticketed(beta.ticket)))).toBe("answered");
  }, 60_000);
});
