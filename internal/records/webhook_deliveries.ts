import { randomBytes } from "node:crypto";
import { TEST_EVENT } from "../webhooks/events";
import { type Db, num, numOrNull, randomId, type Sql } from "./db";
import { BY_CREATED, mapPage, newestFirst, type Page } from "./paging";

// Webhook deliveries: each event announced to an endpoint that subscribed to its type, with
// every attempt. The deliveries are also the queue the workers are fed from: a pending delivery
// is due at due_ms, a claim moves due_ms to the end of its lease and stamps a lease token, and
// only the holder of the current token may report. The reports keep each endpoint's health
// (webhook_endpoints.ts) and disable one that has failed for too long. A workflow's webhook step
// is a delivery of this queue too (step_deliveries.ts), whose end wakes its run.

export const DeliveryState = { PENDING: 0, DELIVERED: 1, FAILED: 2 } as const;
export type DeliveryState = (typeof DeliveryState)[keyof typeof DeliveryState];

/** One event to announce to an organization's endpoints that subscribed to its type. */
export interface WebhookEventInput {
  orgId: string;
  type: string;
  atMs: number;
  data: Record<string, unknown>;
}

export interface WebhookAttempt {
  attempt: number;
  atMs: number;
  durationMs: number;
  /** The receiver's HTTP status; null when there was no answer. */
  statusCode: number | null;
  error: string;
  /** The start of the receiver's answer body; empty when it did not answer. */
  responseExcerpt: string;
}

export interface WebhookDelivery {
  id: string;
  eventType: string;
  state: DeliveryState;
  attempts: WebhookAttempt[];
  /** When the next attempt is due (pending deliveries only). */
  nextAttemptMs: number | null;
  createdMs: number;
}

/** A delivery handed to a worker, with what it needs to sign and send it. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  leaseToken: string;
  url: string;
  secret: string;
  payload: string;
  attempt: number;
}

export interface AttemptReport {
  deliveryId: string;
  leaseToken: string;
  atMs: number;
  durationMs: number;
  statusCode: number | null;
  error: string;
  /** The start of the receiver's answer body; unset: it did not answer. */
  responseExcerpt?: string;
}

export interface ClaimLimits {
  /** At most this many of one endpoint under way at the caller, counting inFlight (0 or unset: no limit). */
  perEndpoint?: number;
  /** At most this many of one organization's endpoints under way at the caller, counting inFlight (0 or unset: no limit). */
  perOrg?: number;
  /** The caller's attempts under way, by endpoint id. */
  inFlight?: ReadonlyMap<string, number>;
}

/** A claim reads this many due candidates per slot asked for, to fill slots past endpoints at their limit. */
const CLAIM_WINDOW = 4;
/** A claim reads at most this many windows: each past what the ones before filled to its share. */
const CLAIM_ROUNDS = 3;

export type ReportResult = "delivered" | "retrying" | "failed" | "disabled" | "stale";

export interface RetryPolicy {
  /** The wait after `failed` failed attempts; undefined: give up. */
  retryDelayMs(failed: number): number | undefined;
  disableAfterMs: number;
}

/** A delivery's row with its attempts (oldest first) as the lists show it. */
function deliveryOf(r: Record<string, unknown>, attempts: Record<string, unknown>[]): WebhookDelivery {
  const state = num(r.state) as DeliveryState;
  return {
    id: r.id as string,
    eventType: r.event_type as string,
    state,
    attempts: attempts.map((a) => ({
      attempt: num(a.attempt),
      atMs: num(a.at_ms),
      durationMs: num(a.duration_ms),
      statusCode: numOrNull(a.status_code),
      error: a.error as string,
      responseExcerpt: a.response_excerpt as string,
    })),
    nextAttemptMs: state === DeliveryState.PENDING ? num(r.due_ms) : null,
    createdMs: num(r.created_ms),
  };
}

/** What a batch of reports did to one endpoint's health, in report order. */
interface HealthChange {
  lastSuccessMs: number | null;
  lastFailureMs: number | null;
  /** Failures after the batch's last success (all of them when it had none). */
  failures: number;
  succeeded: boolean;
}

/** A due delivery a claim may take, with its endpoint and organization. */
interface Candidate {
  id: string;
  endpoint_id: string;
  org_id: string;
}

/** What a claim counts while it picks: the shares, and the attempts under way by endpoint and by organization. */
interface Shares {
  perEndpoint: number;
  perOrg: number;
  byEndpoint: Map<string, number>;
  byOrg: Map<string, number>;
}

/**
 * The deliveries a claim takes (up to max): organization by organization in turn, the one with
 * the oldest due delivery first, each organization's oldest first; none past its endpoint's or
 * its organization's share, counting what the caller has under way. So one organization's
 * backlog, or its endpoints that hang, take its share of a worker's slots and never the others'.
 */
export function pickShares(candidates: Candidate[], max: number, s: Shares): string[] {
  const queues = [...Map.groupBy(candidates, (c) => c.org_id).values()];
  const ids: string[] = [];
  while (ids.length < max && queues.length > 0) {
    for (let i = 0; i < queues.length && ids.length < max; ) {
      const c = queues[i]!.shift();
      if (c === undefined) {
        queues.splice(i, 1);
        continue;
      }
      const byEndpoint = s.byEndpoint.get(c.endpoint_id) ?? 0;
      const byOrg = s.byOrg.get(c.org_id) ?? 0;
      if (byOrg >= s.perOrg) {
        queues.splice(i, 1);
        continue;
      }
      if (byEndpoint < s.perEndpoint) {
        s.byEndpoint.set(c.endpoint_id, byEndpoint + 1);
        s.byOrg.set(c.org_id, byOrg + 1);
        ids.push(c.id);
      }
      i++;
    }
  }
  return ids;
}

export class WebhookDeliveryRecords {
  constructor(private readonly db: Db) {}

  /** An endpoint's deliveries, newest first, with their attempts; undefined when the organization has no such endpoint. */
  async list(
    orgId: string,
    endpointId: string,
    limit: number,
    cursor?: string,
  ): Promise<Page<WebhookDelivery> | undefined> {
    return this.db.run(async (sql) => {
      const [owner] =
        await sql`SELECT id FROM webhook_endpoints WHERE id = ${endpointId} AND org_id = ${orgId} AND workflow_id IS NULL`;
      if (!owner) return undefined;
      const page = await newestFirst<Record<string, unknown>>(
        sql,
        sql`SELECT * FROM webhook_deliveries WHERE endpoint_id = ${endpointId}`,
        BY_CREATED,
        { limit, cursor },
      );
      const ids = page.data.map((r) => r.id as string);
      const attempts =
        ids.length === 0
          ? []
          : await sql`SELECT * FROM webhook_attempts WHERE delivery_id IN ${sql(ids)} ORDER BY attempt`;
      const byDelivery = Map.groupBy(attempts as Record<string, unknown>[], (a) => a.delivery_id as string);
      return mapPage(page, (r) => deliveryOf(r, byDelivery.get(r.id as string) ?? []));
    });
  }

  /**
   * Queues a webhook.test event to the endpoint, due now, whatever event types it subscribed to
   * (and even when it is disabled, so that a fixed receiver can be checked): it is signed,
   * attempted and retried as any delivery. Undefined when the organization has no such endpoint.
   */
  async test(orgId: string, endpointId: string, nowMs: number): Promise<WebhookDelivery | undefined> {
    return this.db.tx(async (sql) => {
      const [owner] =
        await sql`SELECT id FROM webhook_endpoints WHERE id = ${endpointId} AND org_id = ${orgId} AND workflow_id IS NULL`;
      if (!owner) return undefined;
      const row = {
        id: randomId("whd"),
        endpoint_id: endpointId,
        event_type: TEST_EVENT,
        payload: JSON.stringify({
          type: TEST_EVENT,
          timestamp: new Date(nowMs).toISOString(),
          data: { webhookId: endpointId },
        }),
        state: DeliveryState.PENDING,
        attempts: 0,
        due_ms: nowMs,
        created_ms: nowMs,
        updated_ms: nowMs,
      };
      await sql`INSERT INTO webhook_deliveries ${sql(row)}`;
      return deliveryOf(row, []);
    });
  }

  /**
   * Makes a delivered or failed delivery pending again, its next attempt due now (numbered
   * after its last; should it fail, the retry schedule goes on from there). "pending" when it
   * is still pending, undefined when the organization has no such endpoint or it no such delivery.
   */
  async retry(
    orgId: string,
    endpointId: string,
    deliveryId: string,
    nowMs: number,
  ): Promise<WebhookDelivery | "pending" | undefined> {
    return this.db.tx(async (sql) => {
      const [d] = await sql`SELECT d.state FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.id = ${deliveryId} AND d.endpoint_id = ${endpointId} AND e.org_id = ${orgId} AND e.workflow_id IS NULL`;
      if (!d) return undefined;
      const [row] = await sql`UPDATE webhook_deliveries SET state = ${DeliveryState.PENDING}, due_ms = ${nowMs},
        updated_ms = ${nowMs}, lease_token = NULL WHERE id = ${deliveryId} AND state <> ${DeliveryState.PENDING} RETURNING *`;
      if (!row) return "pending";
      const attempts = await sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt`;
      return deliveryOf(row, attempts);
    });
  }

  /**
   * Announces one event of any type to the organization's endpoints that subscribed to it: the
   * seam for events raised outside a message flush (subscriber.*). Returns the deliveries made.
   */
  enqueue(event: WebhookEventInput, nowMs: number): Promise<number> {
    return this.db.tx((sql) => this.enqueueIn(sql, [event], nowMs));
  }

  /** enqueue inside the caller's transaction (the message history flush), for many events. */
  async enqueueIn(sql: Sql, events: WebhookEventInput[], nowMs: number): Promise<number> {
    if (events.length === 0) return 0;
    const orgs = [...new Set(events.map((e) => e.orgId))];
    const endpoints: { id: string; orgId: string; events: string[] }[] = (
      await sql`SELECT id, org_id, events FROM webhook_endpoints WHERE org_id IN ${sql(orgs)} AND disabled_ms IS NULL AND workflow_id IS NULL`
    ).map((ep: Record<string, string>) => ({
      id: ep.id!,
      orgId: ep.org_id!,
      events: JSON.parse(ep.events!) as string[],
    }));
    if (endpoints.length === 0) return 0;
    const rows = events.flatMap((e) => {
      const payload = JSON.stringify({ type: e.type, timestamp: new Date(e.atMs).toISOString(), data: e.data });
      return endpoints
        .filter((ep) => ep.orgId === e.orgId && ep.events.includes(e.type))
        .map((ep) => ({
          id: randomId("whd"),
          endpoint_id: ep.id,
          event_type: e.type,
          payload,
          state: DeliveryState.PENDING,
          attempts: 0,
          due_ms: nowMs,
          created_ms: nowMs,
          updated_ms: nowMs,
        }));
    });
    // Rows per INSERT well under both dialects' limits on bound parameters.
    for (let i = 0; i < rows.length; i += 500) await sql`INSERT INTO webhook_deliveries ${sql(rows.slice(i, i + 500))}`;
    return rows.length;
  }

  /**
   * Leases up to max due deliveries until nowMs + leaseMs, shared by organization (pickShares):
   * at most perOrg of one organization's endpoints and perEndpoint of one endpoint, counting
   * those the caller has under way (inFlight), so that one organization's backlog or hanging
   * endpoints cannot take every slot. Candidates are read first (a bounded window of the due
   * index, past what is at its share already), then taken by an UPDATE that re-checks each
   * row's due time: two daemons claiming at once (PostgreSQL) never take the same delivery.
   */
  async claim(nowMs: number, max: number, leaseMs: number, limits: ClaimLimits = {}): Promise<ClaimedDelivery[]> {
    const token = randomBytes(8).toString("hex");
    const perEndpoint = limits.perEndpoint || Number.POSITIVE_INFINITY;
    const perOrg = limits.perOrg || Number.POSITIVE_INFINITY;
    const inFlight = limits.inFlight ?? new Map<string, number>();
    return this.db.run(async (sql) => {
      // The organizations of the endpoints under way at the caller: its attempts by organization.
      const byOrg = new Map<string, number>();
      if (inFlight.size > 0) {
        const owners =
          (await sql`SELECT id, org_id FROM webhook_endpoints WHERE id IN ${sql([...inFlight.keys()])}`) as {
            id: string;
            org_id: string;
          }[];
        for (const e of owners) byOrg.set(e.org_id, (byOrg.get(e.org_id) ?? 0) + inFlight.get(e.id)!);
      }
      const shares: Shares = { perEndpoint, perOrg, byEndpoint: new Map(inFlight), byOrg };
      const ids: string[] = [];
      // Each round reads a window of the due deliveries past the endpoints and organizations at
      // their share, so that a backlog of theirs does not fill the window while others' wait
      // behind it; another round when this one filled shares but not the claim.
      const window = max * CLAIM_WINDOW;
      for (let round = 0; round < CLAIM_ROUNDS && ids.length < max; round++) {
        const busyEndpoints = [...shares.byEndpoint].filter(([, n]) => n >= perEndpoint).map(([id]) => id);
        const busyOrgs = [...shares.byOrg].filter(([, n]) => n >= perOrg).map(([id]) => id);
        const candidates = (await sql`SELECT d.id, d.endpoint_id, e.org_id FROM webhook_deliveries d
          JOIN webhook_endpoints e ON e.id = d.endpoint_id
          WHERE d.state = 0 AND d.due_ms <= ${nowMs}
            ${busyEndpoints.length > 0 ? sql`AND d.endpoint_id NOT IN ${sql(busyEndpoints)}` : sql``}
            ${busyOrgs.length > 0 ? sql`AND e.org_id NOT IN ${sql(busyOrgs)}` : sql``}
            ${ids.length > 0 ? sql`AND d.id NOT IN ${sql(ids)}` : sql``}
          ORDER BY d.due_ms LIMIT ${window}`) as Candidate[];
        ids.push(...pickShares(candidates, max - ids.length, shares));
        if (candidates.length < window) break;
      }
      if (ids.length === 0) return [];
      const claimed = await sql`UPDATE webhook_deliveries SET due_ms = ${nowMs + leaseMs}, lease_token = ${token}
        WHERE id IN ${sql(ids)} AND state = 0 AND due_ms <= ${nowMs}
        RETURNING id, endpoint_id, url, payload, attempts`;
      if (claimed.length === 0) return [];
      const endpointIds = [...new Set(claimed.map((c: { endpoint_id: string }) => c.endpoint_id))];
      const endpoints = new Map<string, Record<string, string>>(
        (await sql`SELECT id, url, secret FROM webhook_endpoints WHERE id IN ${sql(endpointIds)}`).map(
          (e: Record<string, string>) => [e.id, e],
        ),
      );
      return claimed.flatMap((c: Record<string, unknown>) => {
        const ep = endpoints.get(c.endpoint_id as string);
        return ep
          ? [
              {
                id: c.id as string,
                endpointId: c.endpoint_id as string,
                leaseToken: token,
                url: (c.url as string | null) ?? ep.url!,
                secret: ep.secret!,
                payload: c.payload as string,
                attempt: num(c.attempts) + 1,
              },
            ]
          : [];
      });
    });
  }

  /**
   * Records attempts of lease holders, in one transaction, and decides for each what follows:
   * delivered; due again after the schedule's wait; failed when the schedule is used up; and
   * the endpoint disabled (its pending deliveries failed) when it has failed for
   * policy.disableAfterMs. A report whose lease was lost (it expired and the delivery was
   * claimed again) changes nothing.
   */
  report(reports: AttemptReport[], policy: RetryPolicy): Promise<ReportResult[]> {
    return this.db.tx(async (sql) => {
      const results: ReportResult[] = [];
      const health = new Map<string, HealthChange>();
      for (const r of reports) results.push(await this.reportIn(sql, r, policy, health));
      // One write per endpoint and batch, in id order: batches of several workers that share
      // endpoints lock their rows in the same order.
      for (const [id, h] of [...health].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        const failures = h.succeeded ? sql`${h.failures}` : sql`consecutive_failures + ${h.failures}`;
        await sql`UPDATE webhook_endpoints SET
          last_success_ms = COALESCE(${h.lastSuccessMs}, last_success_ms),
          last_failure_ms = COALESCE(${h.lastFailureMs}, last_failure_ms),
          consecutive_failures = ${failures} WHERE id = ${id}`;
      }
      return results;
    });
  }

  private async reportIn(
    sql: Sql,
    r: AttemptReport,
    policy: RetryPolicy,
    health: Map<string, HealthChange>,
  ): Promise<ReportResult> {
    const ok = r.statusCode !== null && r.statusCode >= 200 && r.statusCode < 300 && r.error === "";
    const state = ok ? DeliveryState.DELIVERED : DeliveryState.PENDING;
    const [d] =
      await sql`UPDATE webhook_deliveries SET attempts = attempts + 1, lease_token = NULL, updated_ms = ${r.atMs}, state = ${state}
      WHERE id = ${r.deliveryId} AND lease_token = ${r.leaseToken} AND state = 0 RETURNING attempts, endpoint_id, run_id`;
    if (!d) return "stale";
    const attempts = num(d.attempts);
    await sql`INSERT INTO webhook_attempts ${sql({
      delivery_id: r.deliveryId,
      attempt: attempts,
      at_ms: r.atMs,
      duration_ms: r.durationMs,
      status_code: r.statusCode,
      error: r.error,
      response_excerpt: r.responseExcerpt ?? "",
    })}`;
    const runId = d.run_id as string | null;
    const h = health.get(d.endpoint_id as string) ?? {
      lastSuccessMs: null,
      lastFailureMs: null,
      failures: 0,
      succeeded: false,
    };
    health.set(d.endpoint_id as string, h);
    if (ok) Object.assign(h, { lastSuccessMs: r.atMs, failures: 0, succeeded: true });
    else Object.assign(h, { lastFailureMs: r.atMs, failures: h.failures + 1 });
    if (ok) {
      await sql`UPDATE webhook_endpoints SET failing_since_ms = NULL WHERE id = ${d.endpoint_id} AND failing_since_ms IS NOT NULL`;
      await wakeRun(sql, runId, r.atMs);
      return "delivered";
    }
    // A workflow's endpoint is never disabled: each of its step's deliveries ends with the schedule.
    if (runId === null && (await this.disableFailing(sql, d.endpoint_id as string, r.atMs, policy))) return "disabled";
    const wait = policy.retryDelayMs(attempts);
    if (wait === undefined) {
      await sql`UPDATE webhook_deliveries SET state = ${DeliveryState.FAILED} WHERE id = ${r.deliveryId}`;
      await wakeRun(sql, runId, r.atMs);
      return "failed";
    }
    await sql`UPDATE webhook_deliveries SET due_ms = ${r.atMs + wait} WHERE id = ${r.deliveryId}`;
    return "retrying";
  }

  /** Marks the endpoint failing since now if it was not; disables it (failing its pending deliveries) once it has failed for too long. */
  private async disableFailing(sql: Sql, endpointId: string, atMs: number, policy: RetryPolicy): Promise<boolean> {
    // The endpoint's row is written (locked) on its first failure only: concurrent batches of
    // reports from several workers then seldom wait for each other (or deadlock, on PostgreSQL).
    await sql`UPDATE webhook_endpoints SET failing_since_ms = ${atMs} WHERE id = ${endpointId} AND failing_since_ms IS NULL`;
    const [ep] = await sql`SELECT failing_since_ms FROM webhook_endpoints WHERE id = ${endpointId}`;
    if (!ep || atMs - num(ep.failing_since_ms) < policy.disableAfterMs) return false;
    const days = Math.round(policy.disableAfterMs / 86_400_000);
    await sql`UPDATE webhook_endpoints SET disabled_ms = ${atMs}, disabled_reason = ${`every attempt failed for ${days} days`} WHERE id = ${endpointId}`;
    await sql`UPDATE webhook_deliveries SET state = ${DeliveryState.FAILED}, updated_ms = ${atMs} WHERE endpoint_id = ${endpointId} AND state = 0`;
    return true;
  }

  /** Deletes up to limit finished deliveries last changed before beforeMs (with their attempts); returns how many. */
  async deleteFinishedBefore(beforeMs: number, limit: number): Promise<number> {
    const gone = await this.db.run(
      (sql) => sql`DELETE FROM webhook_deliveries WHERE id IN
        (SELECT id FROM webhook_deliveries WHERE state <> 0 AND updated_ms < ${beforeMs} ORDER BY updated_ms LIMIT ${limit}) RETURNING id`,
    );
    return gone.length;
  }
}

/**
 * Wakes the workflow run waiting for a step's delivery that just ended. The run is at that
 * step still: it moves on only once it has read that the delivery ended.
 */
async function wakeRun(sql: Sql, runId: string | null, atMs: number): Promise<void> {
  if (runId !== null) await sql`UPDATE workflow_runs SET due_ms = ${atMs} WHERE id = ${runId} AND state = 'active'`;
}
