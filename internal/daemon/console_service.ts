import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { addressGroup } from "../clientip/clientip";
import type { Clock } from "../clock/clock";
import {
  type AddSendingDomainRequest,
  type ConsoleService,
  type CreateApiTokenRequest,
  type CreateUserRequest,
  type GetSessionRequest,
  type GetUsageRequest,
  type ListApiTokensRequest,
  type ListDomainsRequest,
  type RevokeApiTokenRequest,
  type SendingDomain,
  SendingDomainSchema,
  type SignInRequest,
  SignInOutcome,
  type SignOutRequest,
  type VerifyDomainRequest,
} from "../gen/mailcore/limiter/v1/console_pb";
import { RELEASE_WINDOW_S, type UsageStore } from "../hotstore/hotstore";
import { normalizeEmail } from "../mail/policy";
import { planQuota } from "../plans/plans";
import type { ConsoleSession } from "../records/console";
import { verificationRecordName, verificationRecordValue } from "../domainauth/records";
import type { SendingDomainRow } from "../records/domains";
import type { Records } from "../records/records";
import { hashToken, sameSecret } from "../token/token";
import { checkSlug, issueToken } from "./directory_service";
import { addDomain, checkAndSave, type DomainDeps, domainInfo } from "./domain_service";
import type { Projection } from "./projection";
import type { RefusalCounter } from "./refusals";
import { guard } from "./rpc_errors";
import type { Tickets } from "./tickets";

// The console's service (ConsoleService): accounts and sessions, and a signed-in user's view of
// their own organization (API tokens, sending domains, usage).

/** A session lasts a working day from sign-in at most; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3_600_000;
/**
 * Failed sign-ins allowed per window: per client address (an IPv6 client by its network), and
 * per account from one address. An account is never locked for everyone: someone who guesses
 * at a known email locks out only their own address, never its owner.
 */
export const SIGN_IN_WINDOW_MS = 15 * 60_000;
export const SIGN_IN_FAILURES_PER_ADDRESS = 20;
export const SIGN_IN_FAILURES_PER_ACCOUNT = 10;
export const PASSWORD_MIN = 12;
const PASSWORD_MAX = 1_024;
const EMAIL_PATTERN = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
/** argon2id at OWASP's recommended minimum (19 MiB, 2 passes): memory-hard, and a sign-in stays fast. */
const ARGON2 = { algorithm: "argon2id", memoryCost: 19_456, timeCost: 2 } as const;
const SESSION_TOKEN = /^mcs_[A-Za-z0-9_-]{43}$/;

export interface ConsoleDeps {
  usage: UsageStore;
  records: Pick<Records, "console" | "directory" | "domains">;
  projection: Projection;
  refusals: Pick<RefusalCounter, "flush">;
  clock: Clock;
  laneRate: number;
  newToken: () => string;
  /** Sign-ins count an IPv6 client by its network of this many bits (IPV6_PREFIX_BITS). */
  ipv6PrefixBits: number;
  /** A session unused this long has ended (CONSOLE_IDLE_TIMEOUT_MINUTES). */
  idleMs: number;
  /** Make a session's ticket, for the console's organization-scoped calls. */
  tickets: Pick<Tickets, "issue">;
  /** The domain service's: the domains' keys and records, as the API shows them. */
  domains: DomainDeps;
}

/** ConsoleService's methods, by name. */
export function consoleHandlers(deps: ConsoleDeps): ServiceImpl<typeof ConsoleService> {
  // Compared against when the account does not exist, so that an unknown email costs as long as a wrong password.
  const decoy = Bun.password.hash(randomBytes(16).toString("hex"), ARGON2);
  return {
    createUser: (req) => createUser(deps, req),
    signIn: (req) => signIn(deps, decoy, req),
    signOut: (req) => signOut(deps, req),
    getSession: (req) => getSession(deps, req),
    listApiTokens: (req) => listApiTokens(deps, req),
    createApiToken: (req) => createApiToken(deps, req),
    revokeApiToken: (req) => revokeApiToken(deps, req),
    listDomains: (req) => listDomains(deps, req),
    addSendingDomain: (req) => addSendingDomain(deps, req),
    verifyDomain: (req) => verifyDomain(deps, req),
    getUsage: (req) => getUsage(deps, req),
  };
}

/** A domain as the console shows it: the TXT record that proves control of it, and every record it publishes. */
export function domainRecord(deps: Pick<ConsoleDeps, "domains">, row: SendingDomainRow): SendingDomain {
  const info = domainInfo(deps.domains, row);
  return create(SendingDomainSchema, {
    name: row.name,
    verified: row.verified,
    recordName: verificationRecordName(row.name),
    recordValue: verificationRecordValue(row.verifyValue),
    records: info.records,
    status: info.status,
  });
}

/** The session of a session token; Unauthenticated when there is none (or it expired). */
export async function session(
  deps: Pick<ConsoleDeps, "records" | "clock" | "idleMs">,
  token: string,
): Promise<ConsoleSession> {
  const s = SESSION_TOKEN.test(token)
    ? await guard(() => deps.records.console.session(hashToken(token), deps.clock.nowMs(), deps.idleMs))
    : undefined;
  if (!s) throw new ConnectError("not signed in, or the session has expired", Code.Unauthenticated);
  return s;
}

/** The session of a change: its CSRF token must be the session's. */
export async function sessionForChange(
  deps: Pick<ConsoleDeps, "records" | "clock" | "idleMs">,
  token: string,
  csrf: string,
): Promise<ConsoleSession> {
  const s = await session(deps, token);
  if (!sameSecret(csrf, s.csrf))
    throw new ConnectError("the form's CSRF token is missing or not this session's", Code.PermissionDenied);
  return s;
}

export async function createUser(deps: ConsoleDeps, req: CreateUserRequest) {
  const slug = checkSlug(req.slug);
  const email = normalizeEmail(req.email);
  if (email.length > 254 || !EMAIL_PATTERN.test(email))
    throw new ConnectError(`not an email address: ${JSON.stringify(req.email)}`, Code.InvalidArgument);
  if (req.password.length < PASSWORD_MIN || req.password.length > PASSWORD_MAX) {
    throw new ConnectError(`a password is ${PASSWORD_MIN} to ${PASSWORD_MAX} characters`, Code.InvalidArgument);
  }
  const hash = await Bun.password.hash(req.password, ARGON2);
  const { userId } = await guard(() => deps.records.console.createUser(slug, email, hash, deps.clock.nowMs()));
  return { userId };
}

/**
 * Signs in with an email and a password, unless the client's address, or this account from this
 * address, has failed too often lately. The attempt is charged to both before the password is
 * hashed, in one step with the check: attempts sent at once are counted one by one, and each
 * beyond the limits costs no hash. A success gives its charge back and forgets the failures of
 * its address with this account. decoy: a hash to check the password against when the account
 * does not exist.
 */
export async function signIn(deps: ConsoleDeps, decoy: Promise<string>, req: SignInRequest) {
  const accounts = deps.records.console;
  if (isIP(req.clientIp) === 0)
    throw new ConnectError(`client_ip is not an IP address: ${JSON.stringify(req.clientIp)}`, Code.InvalidArgument);
  const email = normalizeEmail(req.email);
  const client = addressGroup(req.clientIp, deps.ipv6PrefixBits);
  const address = `ip:${client}`;
  const pair = `pair:${client}|${email}`;
  const now = deps.clock.nowMs();
  // While either limit is reached, even the right password is refused: that is what stops guessing.
  const charged = await guard(() =>
    accounts.chargeSignIn(
      [
        { subject: address, max: SIGN_IN_FAILURES_PER_ADDRESS },
        { subject: pair, max: SIGN_IN_FAILURES_PER_ACCOUNT },
      ],
      now,
      SIGN_IN_WINDOW_MS,
    ),
  );
  if (!charged.charged)
    return { outcome: SignInOutcome.THROTTLED, retryAfterSeconds: Math.max(1, Math.ceil(charged.waitMs / 1_000)) };

  const user = await guard(() => accounts.userByEmail(email));
  const ok =
    (await Bun.password.verify(req.password.slice(0, PASSWORD_MAX), user?.passwordHash ?? (await decoy))) &&
    user !== undefined;
  if (!ok) return { outcome: SignInOutcome.INVALID };
  const token = `mcs_${randomBytes(32).toString("base64url")}`;
  await guard(async () => {
    await accounts.refundSignIn(charged.charge, pair);
    await accounts.createSession(
      hashToken(token),
      user.id,
      randomBytes(32).toString("base64url"),
      now,
      now + SESSION_TTL_MS,
    );
  });
  return { outcome: SignInOutcome.SIGNED_IN, sessionToken: token, maxAgeSeconds: SESSION_TTL_MS / 1_000 };
}

export async function signOut(deps: ConsoleDeps, req: SignOutRequest) {
  await sessionForChange(deps, req.sessionToken, req.csrfToken);
  await guard(() => deps.records.console.deleteSession(hashToken(req.sessionToken)));
  return {};
}

export async function getSession(deps: ConsoleDeps, req: GetSessionRequest) {
  const s = await session(deps, req.sessionToken);
  return {
    email: s.email,
    orgSlug: s.orgSlug,
    plan: s.plan,
    csrfToken: s.csrf,
    orgId: s.orgId,
    ticket: deps.tickets.issue(s.orgId),
  };
}

export async function listApiTokens(deps: ConsoleDeps, req: ListApiTokensRequest) {
  const s = await session(deps, req.sessionToken);
  const tokens = await guard(() => deps.records.directory.listTokens(s.orgId));
  return {
    tokens: tokens
      .filter((t) => t.revokedMs === null)
      .map((t) => ({ id: t.id, name: t.name, createdMs: BigInt(t.createdMs), lastUsedMs: BigInt(t.lastUsedMs ?? 0) })),
  };
}

export async function createApiToken(deps: ConsoleDeps, req: CreateApiTokenRequest) {
  const s = await sessionForChange(deps, req.sessionToken, req.csrfToken);
  const made = await issueToken(deps, s.orgSlug, req.name);
  return {
    token: made.token,
    info: { id: made.tokenId, name: made.name, createdMs: BigInt(made.createdMs), lastUsedMs: 0n },
  };
}

export async function revokeApiToken(deps: ConsoleDeps, req: RevokeApiTokenRequest) {
  const s = await sessionForChange(deps, req.sessionToken, req.csrfToken);
  // Another organization's token id is simply not found.
  const hash = await guard(() => deps.records.directory.revokeTokenById(s.orgId, req.tokenId, deps.clock.nowMs()));
  await guard(() => deps.projection.writeToken(hash, null));
  return {};
}

export async function listDomains(deps: ConsoleDeps, req: ListDomainsRequest) {
  const s = await session(deps, req.sessionToken);
  return {
    domains: (await guard(() => deps.records.domains.list(s.orgId))).map((row) => domainRecord(deps, row)),
  };
}

export async function addSendingDomain(deps: ConsoleDeps, req: AddSendingDomainRequest) {
  const s = await sessionForChange(deps, req.sessionToken, req.csrfToken);
  return { domain: domainRecord(deps, await addDomain(deps.domains, s.orgId, req.domain)) };
}

/**
 * Checks the domain's records as a receiver reads them (the domain service's check, which keeps
 * what it found); verified when its ownership record holds the organization's value, the
 * detail saying why not otherwise.
 */
export async function verifyDomain(deps: ConsoleDeps, req: VerifyDomainRequest) {
  const s = await sessionForChange(deps, req.sessionToken, req.csrfToken);
  const name = req.domain.trim().toLowerCase();
  const before = await guard(() => deps.records.domains.byName(s.orgId, name));
  if (!before) throw new ConnectError(`no sending domain ${name} in this organization`, Code.NotFound);
  const { domain: checked } = await checkAndSave(deps.domains, before);
  const domain = (await guard(() => deps.records.domains.byName(s.orgId, name))) ?? before;
  if (domain.verified) return { domain: domainRecord(deps, domain) };
  const ownership = checked.records.find((r) => r.purpose === "verification")!;
  if (ownership.status !== "verified") return { domain: domainRecord(deps, domain), detail: ownership.reason };
  const p = await guard(() => deps.records.directory.markDomainVerified(s.orgId, name));
  // The send path's verified-domain check reads the projection.
  await guard(() => deps.projection.writeOrg(p));
  return { domain: domainRecord(deps, { ...domain, verified: true }) };
}

export async function getUsage(deps: ConsoleDeps, req: GetUsageRequest) {
  const s = await session(deps, req.sessionToken);
  // This daemon's refusals not yet written: so a page shows what just happened here.
  await deps.refusals.flush();
  const u = await guard(() => deps.usage.orgUsage(s.orgId, s.plan, deps.clock.nowMs()));
  return {
    plan: s.plan,
    quota: planQuota(s.plan),
    remaining: u.remaining,
    resetSeconds: Math.ceil(u.resetMs / 1_000),
    refusals: u.refusals.map((m) => ({
      minuteStartMs: BigInt(m.minuteStartMs),
      quota: m.quota,
      ip: m.ip,
      recipient: m.recipient,
    })),
    lanes: u.lanes.map((l) => ({
      lane: l.lane,
      depth: BigInt(l.depth),
      releasedPerSecond: l.released / RELEASE_WINDOW_S,
      rate: deps.laneRate,
    })),
  };
}
