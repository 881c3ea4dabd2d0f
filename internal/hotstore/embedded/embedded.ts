import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import type { MessageHistory } from "../../model/history";
import type { OrgProjection } from "../../model/projection";
import {
  type AckInput,
  type AdmitInput,
  type DeliveryPolicy,
  type EnqueueInput,
  type HotStore,
  type LaneSignal,
  type MessageRef,
  type RefusalCount,
  RELEASE_WINDOW_S,
  type SlotPlan,
  type Written,
} from "../hotstore";
import { EmbeddedAdmission } from "./admission";
import { SlotCounters } from "./counters";
import { EmbeddedMail } from "./mail";
import { EmbeddedMessages } from "./messages";
import { EmbeddedOutbox } from "./outbox";
import { EmbeddedReconcile } from "./reconcile";
import { EmbeddedLaneSignals } from "./signals";
import { EmbeddedUsage } from "./usage";

const SWEEP_INTERVAL_MS = 10_000;

/** The SQLite file of the embedded hot store under a data directory. */
export function embeddedHotFile(dataDir: string): string {
  return join(dataDir, "hot.db");
}

/**
 * The embedded hot store: buckets and the projection in memory (a restart forgives what was
 * consumed, and the projection rebuilds from the records), the lanes, guard logs, cooldowns and
 * idempotency records in a SQLite file (WAL) so that nothing accepted is lost in a crash. One
 * daemon owns the file; to run several daemons, use Redis.
 */
export class EmbeddedHot implements HotStore {
  private readonly db: Database;
  private readonly sweeper: ReturnType<typeof setInterval>;
  private readonly admission: EmbeddedAdmission;
  private readonly mail: EmbeddedMail;
  private readonly usage: EmbeddedUsage;
  private readonly outbox: EmbeddedOutbox;
  private readonly reconcile: EmbeddedReconcile;
  private readonly signals = new EmbeddedLaneSignals();
  private readonly messages: EmbeddedMessages;

  /** file null keeps everything in memory (tests). */
  constructor(
    file: string | null,
    private readonly clock: () => number = Date.now,
  ) {
    this.db = openOwned(file);
    this.messages = new EmbeddedMessages(this.db);
    const released = new SlotCounters<Lane>(1_000, RELEASE_WINDOW_S + 1);
    this.admission = new EmbeddedAdmission(clock);
    this.mail = new EmbeddedMail(
      this.messages,
      (orgId, domain) => this.admission.domainVerified(orgId, domain),
      released,
      this.signals,
    );
    this.usage = new EmbeddedUsage(this.admission, this.messages, released);
    this.outbox = new EmbeddedOutbox(this.messages);
    this.reconcile = new EmbeddedReconcile(this.messages, this.signals);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  admit(inputs: AdmitInput[], nowMs: number) {
    return this.admission.admit(inputs, nowMs);
  }
  lookupToken(tokenHash: string) {
    return this.admission.lookupToken(tokenHash);
  }
  projectOrg(p: OrgProjection) {
    return this.admission.projectOrg(p);
  }
  touchAudience(orgId: string) {
    return this.admission.touchAudience(orgId);
  }
  projectToken(tokenHash: string, orgId: string | null, mode: "write" | "fill") {
    return this.admission.projectToken(tokenHash, orgId, mode);
  }

  enqueue(input: EnqueueInput, nowMs: number) {
    return this.mail.enqueue(input, nowMs);
  }
  release(lane: Lane, nowMs: number, plan: SlotPlan) {
    return this.mail.release(lane, nowMs, plan);
  }
  lease(max: number, nowMs: number, visibilityMs: number) {
    return this.mail.lease(max, nowMs, visibilityMs);
  }
  ack(input: AckInput, policy: DeliveryPolicy, nowMs: number) {
    return this.mail.ack(input, policy, nowMs);
  }
  recover(nowMs: number, policy: DeliveryPolicy) {
    return this.mail.recover(nowMs, policy);
  }
  getMessage(orgId: string, messageId: string) {
    return this.mail.getMessage(orgId, messageId);
  }
  laneCounts(nowMs: number) {
    return this.mail.laneCounts(nowMs);
  }

  countRefusals(counts: RefusalCount[], nowMs: number) {
    return this.usage.countRefusals(counts, nowMs);
  }
  orgUsage(orgId: string, plan: Plan, nowMs: number) {
    return this.usage.orgUsage(orgId, plan, nowMs);
  }

  changedMessages(max: number) {
    return this.outbox.changedMessages(max);
  }
  settle(written: Written[]) {
    return this.outbox.settle(written);
  }

  presence(messages: MessageRef[]) {
    return this.reconcile.presence(messages);
  }
  restore(messages: MessageHistory[], nowMs: number) {
    return this.reconcile.restore(messages, nowMs);
  }
  unfinishedHere() {
    return this.reconcile.unfinishedHere();
  }
  drop(stale: Written[]) {
    return this.reconcile.drop(stale);
  }

  watchLanes(on: (signal: LaneSignal) => void): () => void {
    return this.signals.watchLanes(on);
  }

  /** One daemon owns the embedded store, so it always runs the singletons. */
  async holdLease(): Promise<boolean> {
    return true;
  }

  async ping(): Promise<void> {
    this.db.query("SELECT 1").get();
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.db.close();
  }

  /** Drops what has expired. */
  private sweep(): void {
    const now = this.clock();
    this.messages.sweep(now);
    this.usage.sweep(now);
    this.admission.sweep(now);
  }
}

/**
 * Opens the SQLite file (":memory:" for null) and takes it for this process: a second daemon on
 * the same DATA_DIR would run lane schedulers of its own. The lock is taken now, and the OS
 * drops it when the process dies.
 */
function openOwned(file: string | null): Database {
  let path = ":memory:";
  if (file) {
    mkdirSync(join(file, ".."), { recursive: true });
    path = file;
  }
  const db = new Database(path, { create: true, strict: true });
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    db.exec("BEGIN IMMEDIATE; COMMIT;");
  } catch (err) {
    db.close();
    if (String(err).includes("locked"))
      throw new Error(
        `${path} is in use by another limiterd: one daemon owns the embedded store (use Redis to run several)`,
      );
    throw err;
  }
  return db;
}
