import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DiskSpace, makeDir } from "../diskspace/diskspace";
import type { DeliveryOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import type { DeliveryAttemptRecord } from "../model/history";

/** A delivery's result, as the worker owes it to limiterd. */
export interface PendingAck {
  leaseId: string;
  messageId: string;
  orgId: string;
  outcome: DeliveryOutcome;
  detail: string;
  requestId: string;
  /** For DEFERRED: the wait the receiver asked for (ms), and whether the retry is on the schedule in hours. */
  retryAfterMs?: number;
  retryInHours?: boolean;
  /** How a refusal was classified. */
  bounce?: { type: string; status: string; diagnostic: string };
  /** The tries at receivers. */
  attempts?: DeliveryAttemptRecord[];
}

/**
 * Acks that limiterd has not accepted yet, one file each under a directory, so that neither an
 * outage of the daemon or its store nor a restart of the worker loses one: a lost ack means the
 * lease expires and the message is delivered again. Any worker on the same DATA_DIR sends the
 * acks it finds at start; an ack sent twice is harmless (the second is not current).
 */
export class AckJournal {
  /** Whether the directory is there: a worker started on a full disk makes it at its first write. */
  private made: boolean;

  constructor(
    private readonly dir: string,
    disk?: DiskSpace,
  ) {
    this.made = makeDir(dir, "acks", disk);
  }

  private file(leaseId: string): string {
    // Lease ids are ours (hex and dashes); anything else is kept out of the path.
    return join(this.dir, `${leaseId.replace(/[^A-Za-z0-9_-]/g, "_")}.json`);
  }

  /** Writes the ack; throws what the write threw (a full disk: ENOSPC), leaving no part of it behind. */
  add(ack: PendingAck): void {
    const path = this.file(ack.leaseId);
    try {
      if (!this.made) {
        mkdirSync(this.dir, { recursive: true });
        this.made = true;
      }
      writeFileSync(`${path}.tmp`, JSON.stringify(ack));
    } catch (err) {
      rmSync(`${path}.tmp`, { force: true });
      throw err;
    }
    renameSync(`${path}.tmp`, path);
  }

  remove(leaseId: string): void {
    rmSync(this.file(leaseId), { force: true });
  }

  /** The acks left by an earlier run (or another worker). */
  list(): PendingAck[] {
    const acks: PendingAck[] = [];
    if (!this.made) return acks;
    for (const name of readdirSync(this.dir)) {
      if (name.endsWith(".tmp")) rmSync(join(this.dir, name), { force: true }); // cut off before its rename: not owed yet
      if (!name.endsWith(".json")) continue;
      try {
        acks.push(JSON.parse(readFileSync(join(this.dir, name), "utf8")) as PendingAck);
      } catch {
        rmSync(join(this.dir, name), { force: true }); // unreadable: the message's lease will expire and it is sent again
      }
    }
    return acks;
  }
}
