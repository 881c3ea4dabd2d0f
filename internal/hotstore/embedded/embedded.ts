import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import { type HotStore, RELEASE_WINDOW_S, type SingletonLeases, type StoreLifecycle } from "../hotstore";
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
  readonly admission: EmbeddedAdmission;
  readonly mail: EmbeddedMail;
  readonly usage: EmbeddedUsage;
  readonly outbox: EmbeddedOutbox;
  readonly reconcile: EmbeddedReconcile;
  /** One daemon owns the embedded store, so it always runs the singletons. */
  readonly leases: SingletonLeases = { holdLease: async () => true };
  readonly signals = new EmbeddedLaneSignals();
  readonly lifecycle: StoreLifecycle;

  /** file null keeps everything in memory (tests). */
  constructor(file: string | null, clock: () => number = Date.now) {
    const db = openOwned(file);
    const messages = new EmbeddedMessages(db);
    const released = new SlotCounters<Lane>(1_000, RELEASE_WINDOW_S + 1);
    this.admission = new EmbeddedAdmission(clock);
    this.mail = new EmbeddedMail(
      messages,
      (orgId, domain) => this.admission.domainVerified(orgId, domain),
      released,
      this.signals,
    );
    this.usage = new EmbeddedUsage(this.admission, messages, released);
    this.outbox = new EmbeddedOutbox(messages);
    this.reconcile = new EmbeddedReconcile(messages, this.signals);
    // Drops what has expired.
    const sweeper = setInterval(() => {
      const now = clock();
      messages.sweep(now);
      this.usage.sweep(now);
      this.admission.sweep(now);
    }, SWEEP_INTERVAL_MS);
    sweeper.unref();
    this.lifecycle = {
      ping: async () => {
        db.query("SELECT 1").get();
      },
      close: async () => {
        clearInterval(sweeper);
        db.close();
      },
    };
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
