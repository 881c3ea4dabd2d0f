import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import { dkimRecordName, dkimRecordValue } from "../dkim/keys";
import type { Resolve } from "../dnsquery/resolver";
import { whatChanged, domainStatus } from "../domainauth/changes";
import { checkDomain as checkRecords } from "../domainauth/check";
import {
  type DomainRecord,
  type Platform,
  recordKey,
  recordsToPublish,
  type SendingDomain,
} from "../domainauth/records";
import {
  type CheckDomainRequest,
  type CreateDomainRequest,
  type DeleteDomainRequest,
  type DomainService,
  type GetDomainRequest,
  type RotateDkimKeyRequest,
  type SendingDomainInfo,
  SendingDomainInfoSchema,
} from "../gen/mailcore/limiter/v1/domains_pb";
import type { Logger } from "../log/log";
import { randomId } from "../records/db";
import { newVerifyValue } from "../records/directory";
import type { SendingDomainRow } from "../records/domains";
import type { Records } from "../records/records";
import type { Projection } from "./projection";
import { guard } from "./rpc_errors";
import type { Signing } from "./signing";
import { tenantOf } from "./tenant";
import { storedDomainName } from "../mail/domain_name";

// The domain service (DomainService): an organization's sending domains with the DNS records
// each publishes, checked against DNS as a receiver reads them (internal/domainauth), and the
// rotation of their DKIM keys. Every RPC is for the organization of the admission ticket. The
// recheck loop (domain_recheck.ts) runs the same check on a schedule.

/** How long a retired key's record stays shown as still needed: mail it signed may be verified for days. */
export const RETIRED_GRACE_MS = 7 * 86_400_000;
/** When a retired key is forgotten (its record long shown removable). */
const RETIRED_FORGET_MS = 30 * 86_400_000;

export interface DomainDeps {
  records: Pick<Records, "domains" | "directory" | "webhookDeliveries">;
  projection: Pick<Projection, "writeOrg">;
  signing: Pick<Signing, "newKeys" | "forget">;
  clock: Clock;
  /** The project's resolver (DNS_SERVER, or the system's). */
  resolve: Resolve;
  platform: Platform;
  log: Logger;
  /** DOMAIN_RECHECK_S: when a domain is checked again after a check. */
  recheckMs: number;
}

/** When a check that DNS did not answer is tried again, at the latest. */
const RETRY_UNANSWERED_MS = 5 * 60_000;

/** DomainService's methods, by name. */
export function domainHandlers(deps: DomainDeps): ServiceImpl<typeof DomainService> {
  return {
    createDomain: (req, ctx) => createDomain(deps, tenantOf(ctx.values), req),
    listSendingDomains: async (_req, ctx) => ({
      domains: (await guard(() => deps.records.domains.list(tenantOf(ctx.values)))).map((d) => domainInfo(deps, d)),
    }),
    getDomain: async (req: GetDomainRequest, ctx) => ({
      domain: domainInfo(deps, await found(deps, tenantOf(ctx.values), req.domainId)),
    }),
    checkDomain: (req: CheckDomainRequest, ctx) => checkNow(deps, tenantOf(ctx.values), req.domainId),
    rotateDkimKey: (req: RotateDkimKeyRequest, ctx) => rotate(deps, tenantOf(ctx.values), req.domainId),
    deleteDomain: (req: DeleteDomainRequest, ctx) => remove(deps, tenantOf(ctx.values), req.domainId),
  };
}

/** A domain name as stored: lower-case ASCII, an IDN as punycode, no final dot; InvalidArgument when it is not one. */
export function domainName(input: string): string {
  const name = storedDomainName(input);
  if (name === undefined) throw new ConnectError(`${JSON.stringify(input)} is not a domain name`, Code.InvalidArgument);
  return name;
}

async function found(deps: DomainDeps, orgId: string, id: string): Promise<SendingDomainRow> {
  const row = await guard(() => deps.records.domains.get(orgId, id));
  if (!row) throw new ConnectError(`no domain ${id} in this organization`, Code.NotFound);
  return row;
}

async function createDomain(deps: DomainDeps, orgId: string, req: CreateDomainRequest) {
  return { domain: domainInfo(deps, await addDomain(deps, orgId, req.name)) };
}

/** Adds a sending domain with its DKIM keys (the API's create, the console's add). */
export async function addDomain(deps: DomainDeps, orgId: string, input: string): Promise<SendingDomainRow> {
  const name = domainName(input);
  const keys = await deps.signing.newKeys([], "active");
  const row = await guard(() =>
    deps.records.domains.add({
      id: randomId("dom"),
      orgId,
      name,
      verifyValue: newVerifyValue(),
      keys,
      nowMs: deps.clock.nowMs(),
    }),
  );
  deps.log.info("added a sending domain", { orgId, domain: name, id: row.id });
  return row;
}

/** The domain as domainauth reads it: its ownership value and the keys whose records are asked for. */
function sendingDomain(row: SendingDomainRow): SendingDomain {
  return {
    name: row.name,
    verifyValue: row.verifyValue,
    keys: row.keys
      .filter((k) => k.state !== "retired")
      .map((k) => ({
        selector: k.selector,
        algorithm: k.algorithm,
        publicKey: k.publicKey,
        state: k.state as "active" | "pending",
      })),
  };
}

/** The records to show: those to publish, each with its status from the last check of the same value (else pending). */
function currentRecords(deps: DomainDeps, row: SendingDomainRow): DomainRecord[] {
  const last = new Map(((row.checked ?? []) as DomainRecord[]).map((r) => [recordKey(r), r]));
  return recordsToPublish(sendingDomain(row), deps.platform).map((r) => {
    const before = last.get(recordKey(r));
    return before?.value === r.value ? { ...r, status: before.status, reason: before.reason } : r;
  });
}

/** The records of the retired keys: still needed during the grace period, then removable. */
function retiredRecords(deps: DomainDeps, row: SendingDomainRow): DomainRecord[] {
  const now = deps.clock.nowMs();
  return row.keys
    .filter((k) => k.state === "retired")
    .map((k) => {
      const until = new Date(k.changedMs + RETIRED_GRACE_MS).toISOString();
      return {
        purpose: "dkim",
        type: "TXT",
        name: dkimRecordName(k.selector, row.name),
        value: dkimRecordValue(k.algorithm, k.publicKey),
        status: "verified",
        reason:
          now < k.changedMs + RETIRED_GRACE_MS
            ? `retired by a rotation: no longer signs; keep it published until ${until} (mail it signed is still verified)`
            : `retired by a rotation: removable since ${until}`,
        required: false,
      };
    });
}

/** A domain as the API (and the console) show it: its records as last checked, and its status from them. */
export function domainInfo(
  deps: DomainDeps,
  row: SendingDomainRow,
  records = currentRecords(deps, row),
): SendingDomainInfo {
  return create(SendingDomainInfoSchema, {
    id: row.id,
    name: row.name,
    status: domainStatus(records),
    records: [...records, ...retiredRecords(deps, row)].map((r) => ({
      purpose: r.purpose,
      type: r.type,
      name: r.name,
      value: r.value,
      status: r.status,
      reason: r.reason ?? "",
    })),
    createdAtMs: BigInt(row.createdMs),
    checkedAtMs: BigInt(row.checkedMs ?? 0),
  });
}

/**
 * Checks a domain's records against DNS and keeps what it found: the records' statuses, the
 * right to send when every record it waits on verified, the promotion of a pending key whose
 * record verified, and an event when the domain's status changed. A lookup that did not answer
 * (a timeout, a server failure) changes nothing: the answer says so.
 */
export async function checkAndSave(
  deps: DomainDeps,
  row: SendingDomainRow,
): Promise<{ domain: SendingDomainInfo; dnsUnavailable: boolean }> {
  let dnsUnavailable = false;
  const resolve: Resolve = async (type, name) => {
    const answer = await deps.resolve(type, name);
    if (answer.kind === "temporary") dnsUnavailable = true;
    return answer;
  };
  const previous = currentRecords(deps, row);
  const records = await checkRecords(resolve, sendingDomain(row), deps.platform, previous);
  const nowMs = deps.clock.nowMs();
  if (dnsUnavailable) {
    await guard(() =>
      deps.records.domains.postpone(row.orgId, row.id, nowMs + Math.min(deps.recheckMs, RETRY_UNANSWERED_MS)),
    );
    return { domain: domainInfo(deps, row, records), dnsUnavailable };
  }
  const verifiedDkim = new Set(
    records.filter((r) => r.purpose === "dkim" && r.status === "verified").map((r) => r.name),
  );
  const promote = row.keys
    .filter((k) => k.state === "pending" && verifiedDkim.has(dkimRecordName(k.selector, row.name)))
    .map((k) => k.selector);
  const activeNames = new Set(
    row.keys.filter((k) => k.state === "active").map((k) => dkimRecordName(k.selector, row.name)),
  );
  const dkimFailing = records.some((r) => activeNames.has(r.name) && r.status === "failed");
  if (dkimFailing)
    deps.log.warn(
      "an active DKIM key's record failed: the domain's mail is still signed, and fails DKIM at receivers",
      {
        orgId: row.orgId,
        domain: row.name,
      },
    );
  const status = domainStatus(records);
  const { wasVerified } = await guard(() =>
    deps.records.domains.saveCheck(
      row.orgId,
      row.id,
      { records, grant: status === "verified", nextMs: nowMs + deps.recheckMs, dkimFailing, promote },
      nowMs,
    ),
  );
  if (status === "verified" && !wasVerified) {
    const p = await guard(() => deps.records.directory.orgProjection(row.orgId));
    if (p) await guard(() => deps.projection.writeOrg(p));
  }
  if (promote.length > 0) {
    deps.signing.forget(row.orgId, row.name);
    deps.log.info("a rotation's DKIM key verified: it signs from now on", {
      orgId: row.orgId,
      domain: row.name,
      selectors: promote.join(" "),
    });
  }
  await guard(() => deps.records.domains.dropRetired(row.orgId, row.name, nowMs - RETIRED_FORGET_MS));
  const changes = whatChanged(previous, records);
  if (changes.event) {
    await guard(() =>
      deps.records.webhookDeliveries.enqueue(
        {
          orgId: row.orgId,
          type: changes.event!,
          atMs: nowMs,
          data: {
            id: row.id,
            name: row.name,
            status: status,
            records: changes.records.map((c) => ({
              purpose: c.purpose,
              type: c.type,
              name: c.name,
              from: c.from ?? null,
              to: c.to ?? null,
              reason: c.reason ?? null,
            })),
          },
        },
        nowMs,
      ),
    );
    deps.log.info("a sending domain's status changed", {
      orgId: row.orgId,
      domain: row.name,
      from: changes.domain!.from,
      to: changes.domain!.to,
    });
  }
  return {
    domain: domainInfo(deps, (await guard(() => deps.records.domains.get(row.orgId, row.id))) ?? row),
    dnsUnavailable,
  };
}

async function checkNow(deps: DomainDeps, orgId: string, id: string) {
  return checkAndSave(deps, await found(deps, orgId, id));
}

async function rotate(deps: DomainDeps, orgId: string, id: string) {
  const row = await found(deps, orgId, id);
  const pending = row.keys.filter((k) => k.state === "pending");
  if (pending.length > 0)
    throw new ConnectError(
      `a rotation of ${row.name} is pending (selector ${pending[0]!.selector}): publish its record and verify the domain first`,
      Code.FailedPrecondition,
    );
  const keys = await deps.signing.newKeys(
    row.keys.map((k) => k.selector),
    "pending",
  );
  await guard(() => deps.records.domains.addKeys(orgId, row.name, keys, deps.clock.nowMs()));
  deps.log.info("a DKIM rotation began: the new key waits for its record", {
    orgId,
    domain: row.name,
    selectors: keys.map((k) => k.selector).join(" "),
  });
  return { domain: domainInfo(deps, await found(deps, orgId, id)) };
}

async function remove(deps: DomainDeps, orgId: string, id: string) {
  const row = await guard(() => deps.records.domains.remove(orgId, id));
  const p = await guard(() => deps.records.directory.orgProjection(orgId));
  if (p) await guard(() => deps.projection.writeOrg(p));
  deps.signing.forget(orgId, row.name);
  deps.log.info("removed a sending domain", { orgId, domain: row.name, id });
  return {};
}
