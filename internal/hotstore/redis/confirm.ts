import { Cluster } from "ioredis";
import { MicroBatcher } from "../../batch/batcher";
import { keys } from "./layout";
import type { RedisClient, ScriptedRedis } from "./scripts";

/**
 * How many replicas must have a message's change before it counts (WAIT): a number, or
 * "detect": 1 when the primary that holds the messages has a replica, 0 otherwise.
 */
export interface WaitPolicy {
  replicas: number | "detect";
  timeoutMs: number;
}

/** A change of a message that the primary made but that its replicas did not confirm in time. */
export class NotConfirmed extends Error {
  /** What the script answered on the primary. */
  constructor(
    message: string,
    readonly reply?: unknown,
  ) {
    super(message);
  }
}

/** The scripts that change a message's state (the reconciliation's too), and the outbox the records writer copies. */
export type WriteScript =
  | "enqueue"
  | "release"
  | "lease"
  | "ack"
  | "keep"
  | "recover"
  | "collect"
  | "settle"
  | "putback"
  | "drop"
  | "cool"
  | "hold_lane";

type Outcome = { value: unknown } | { error: unknown };

/** Batches queued while one is under way, at most this many scripts each. */
const MAX_BATCH = 256;

/**
 * How old a look at the primary's replicas may be when a change is made under "detect": an older
 * one is made again first (and a look is made at once whenever the waiting connection connects
 * again: a failover, a restart). No look while nothing changes: an idle daemon asks nothing.
 */
const DETECT_EVERY_MS = 1_000;

/** What INFO replication says of the primary that holds the messages. */
function replication(info: string): { replid: string; connected: number } {
  const field = (name: string) => info.match(new RegExp(`^${name}:(.*)$`, "m"))?.[1]?.trim() ?? "";
  return { replid: field("master_replid"), connected: Number(field("connected_slaves") || 0) };
}

/**
 * Runs the scripts that change a message's state so that a change counts only once it survives
 * its primary. With replicas to wait for, they go on a connection of their own (WAIT blocks the
 * connection it runs on: admission keeps its own and never queues behind replication), in
 * batches: every script queued while a batch is under way goes in the next one, followed by one
 * `WAIT <replicas> <timeout>` on the same connection, which the primary that ran them (in a
 * Cluster, the one holding the {mail} slot: the batch carries its keys) answers once that many
 * replicas have every write of the connection so far. Short of that, every script of the batch
 * fails with NotConfirmed: it ran, and may or may not outlive a failover.
 *
 * Under "detect" the count follows the primary: 1 once it has been seen with a replica, 0 while it
 * never has. A replica that drops off (a partition) does not lower it, or the writes made while
 * it is away would be the ones a failover loses; a new primary (a failover, a restart: a new
 * replication id) is counted afresh. A replica still in its first full sync counts: it confirms
 * nothing until it has synced (changes answer "not confirmed" meanwhile), but a failover could
 * promote it, and a change it never had would be lost.
 */
export class ConfirmedWrites {
  private readonly batcher: MicroBatcher<[WriteScript, (string | number)[]], Outcome>;
  private replicas: number;
  private replid = "";
  /** Told every change of the count that the looks make. */
  private changed: ((replicas: number) => void) | undefined;
  /** Under "detect": when the last look began (monotonic ms), and the look under way. */
  private lookedAt = Number.NEGATIVE_INFINITY;
  private looking: Promise<void> | undefined;
  /** Settles once the first look at the primary's replicas is done (at once when the count is given). */
  readonly ready: Promise<void>;

  constructor(
    private readonly direct: ScriptedRedis,
    private readonly writer: ScriptedRedis | undefined,
    private readonly policy: WaitPolicy,
  ) {
    this.replicas = policy.replicas === "detect" ? 0 : policy.replicas;
    this.batcher = new MicroBatcher((items) => this.runBatch(items), MAX_BATCH);
    if (policy.replicas === "detect" && writer) {
      this.ready = this.look();
      writer.on("ready", () => void this.look());
    } else this.ready = Promise.resolve();
  }

  /** The replicas a change waits for now. */
  waitingFor(): number {
    return this.writer ? this.replicas : 0;
  }

  async run(script: WriteScript, args: (string | number)[]): Promise<unknown> {
    if (this.policy.replicas === "detect" && this.writer && performance.now() - this.lookedAt >= DETECT_EVERY_MS)
      await this.look();
    if (this.waitingFor() === 0) return this.direct[script](...args);
    const outcome = await this.batcher.submit([script, args]);
    if ("error" in outcome) throw outcome.error;
    return outcome.value;
  }

  /** Calls on(replicas) whenever a look changes the count (a failover, a first look that failed). */
  watch(on: (replicas: number) => void): void {
    this.changed = on;
  }

  close(): void {
    this.writer?.disconnect();
  }

  private async runBatch(items: [WriteScript, (string | number)[]][]): Promise<Outcome[]> {
    const replicas = this.waitingFor();
    const pipeline = this.writer!.pipeline() as unknown as Record<string, (...a: unknown[]) => unknown> & {
      exec(): Promise<[Error | null, unknown][] | null>;
    };
    for (const [script, args] of items) pipeline[script]!(...args);
    if (replicas > 0) pipeline.wait!(replicas, this.policy.timeoutMs);
    const replies = (await pipeline.exec()) ?? [];
    this.followRedirects(replies);
    let confirmed: Error | undefined; // why the batch's changes are not confirmed
    if (replicas > 0) {
      const [err, acked] = replies[items.length] ?? [new Error("no answer to WAIT"), 0];
      if (err) confirmed = new Error(`WAIT failed: ${err.message}`);
      else if ((acked as number) < replicas)
        confirmed = new Error(
          `${acked} of ${replicas} replicas confirmed the change within ${this.policy.timeoutMs} ms`,
        );
    }
    return items.map((_, i) => {
      const [err, value] = replies[i] ?? [new Error("no answer"), null];
      if (err) return { error: err };
      return confirmed ? { error: new NotConfirmed(confirmed.message, value) } : { value };
    });
  }

  /**
   * A Cluster client retries a redirected pipeline only when every command of it was redirected;
   * the WAIT at its end never is (it has no key), so after a failover the slot map is refreshed
   * here, and the callers' retries reach the new primary.
   */
  private followRedirects(replies: [Error | null, unknown][]): void {
    if (this.writer instanceof Cluster && replies.some(([err]) => err && /^(MOVED|ASK) /.test(err.message)))
      this.writer.refreshSlotsCache();
  }

  /** One look at a time: the changes made meanwhile wait for the one under way. */
  private look(): Promise<void> {
    this.lookedAt = performance.now();
    this.looking ??= this.detect().finally(() => {
      this.looking = undefined;
    });
    return this.looking;
  }

  /** Looks at the replicas of the primary holding the messages (the pipeline's key routes INFO there). */
  private async detect(): Promise<void> {
    try {
      const replies =
        (await (this.writer as RedisClient).pipeline().exists(keys.outbox()).info("replication").exec()) ?? [];
      this.followRedirects(replies);
      const [routed] = replies[0] ?? [new Error("no answer")];
      const [err, info] = replies[1] ?? [new Error("no answer"), ""];
      if (routed || err) return; // not the primary of the slot (a redirect): look again next time
      const { replid, connected } = replication(info as string);
      const seen = connected > 0 ? 1 : 0;
      const was = this.replicas;
      this.replicas = replid === this.replid ? Math.max(this.replicas, seen) : seen;
      this.replid = replid;
      if (this.replicas !== was) this.changed?.(this.replicas);
    } catch {
      // Unreachable for now: keep the count; the next look or the next batch will tell.
    }
  }
}
