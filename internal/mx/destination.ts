// A destination: the set of MX hosts that a recipient domain's mail goes to (many domains share
// one, as every domain hosted by Google Workspace does), with its own queue, its own
// connections and its own shaping. A message waits only for its own destination's connections
// and pace, so a slow or dead destination never holds another's mail; it waits at most
// maxWaitMs, then goes back to the daemon as a deferral, so it never holds a worker either.
import type { TimerClock } from "../clock/clock";
import type { Classification } from "../feedback/classify";
import { type Attempt, classify, describe, type Failure, type Verdict } from "./outcome";
import { matchesAny } from "./reply";
import type { RouteHost } from "./lookups";
import { MxSession, SessionError, type SessionTimeouts, type TlsMode } from "./session";
import type { Limits, Shaping } from "./shaping";

/** What became of a message at a destination. */
export interface MxResult {
  verdict: Verdict;
  /** Every attempt made for it, in order: addresses that failed, then the transaction. */
  attempts: Attempt[];
  /** For a failure: what it means for the mailbox (internal/feedback's classification). */
  bounce?: Classification;
  /** For a temporary failure: the wait a reply asked for, or until a suspended destination is tried again. */
  retryAfterMs?: number;
  /** The last attempt, in one line. */
  detail: string;
}

export interface DestinationOptions {
  /** Names the destination in records and logs. */
  key: string;
  /** The shaping rule's name and limits for this destination. */
  rule: { name: string; limits: Limits };
  shaping: Shaping;
  tls: TlsMode;
  port: number;
  heloName: string;
  timeouts: SessionTimeouts;
  trustedCa?: string[];
  time: TimerClock;
  /** Longest a message waits in the queue for a connection or its turn before it is deferred. */
  maxWaitMs: number;
  /** Most messages waiting in the queue; one more is deferred at once (a slow destination holds no more of the worker). */
  maxQueued: number;
  /** An idle connection is closed after this. */
  idleMs: number;
  /** Addresses tried to open one connection (RFC 5321 5.1 asks for a limit). */
  maxAddresses: number;
  /** After every address failed to give a session, new messages are deferred at once for this long. */
  suspendMs: number;
}

/** One message for a destination: its envelope and bytes, and the hosts to try (most preferred first). */
export interface Job {
  hosts: RouteHost[];
  returnPath: string;
  recipient: string;
  raw: Buffer;
}

interface Waiting {
  job: Job;
  done: (r: MxResult) => void;
  cancelWait: () => void;
}

/** The state a destination shows (admin, metrics). */
export interface DestinationState {
  key: string;
  rule: string;
  queued: number;
  connections: number;
  idle: number;
  slowedUntilMs: number;
  suspendedUntilMs: number;
  /** Since when its tries have failed for now, with no success or final answer since (0: not failing). */
  failingSinceMs: number;
}

export class Destination {
  private readonly queue: Waiting[] = [];
  private readonly idle: { session: MxSession; cancel: () => void }[] = [];
  /** Connections open or opening. */
  private open = 0;
  private nextStartMs = 0;
  private slowedUntilMs = 0;
  private suspendedUntilMs = 0;
  private lastConnectFailure = "";
  private cancelPump: (() => void) | undefined;
  private closed = false;

  constructor(private readonly o: DestinationOptions) {}

  /** Delivers one message through this destination; never rejects. */
  deliver(job: Job): Promise<MxResult> {
    return new Promise((done) => {
      if (this.closed) return done(this.deferred("the transport is closed"));
      if (this.queue.length >= this.o.maxQueued)
        return done(this.deferred(`${this.o.maxQueued} messages wait for ${this.o.key} already`));
      const w: Waiting = {
        job,
        done,
        cancelWait: this.o.time.setTimer(this.o.maxWaitMs, () => {
          const i = this.queue.indexOf(w);
          if (i < 0) return;
          this.queue.splice(i, 1);
          done(this.deferred(`waited ${this.o.maxWaitMs} ms for a connection to ${this.o.key}`));
        }),
      };
      this.queue.push(w);
      this.pump();
    });
  }

  /** The limits in force now: the rule's, or lower while the destination is slowed. */
  limits(): Limits {
    const l = this.o.rule.limits;
    if (this.o.time.nowMs() >= this.slowedUntilMs) return l;
    const s = this.o.shaping.slowdown;
    return {
      ...l,
      connections: Math.min(l.connections, s.connections),
      messagesPerMinute: Math.min(l.messagesPerMinute, s.messagesPerMinute),
    };
  }

  state(): DestinationState {
    return {
      key: this.o.key,
      rule: this.o.rule.name,
      queued: this.queue.length,
      connections: this.open,
      idle: this.idle.length,
      slowedUntilMs: this.slowedUntilMs,
      suspendedUntilMs: this.suspendedUntilMs,
      failingSinceMs: 0,
    };
  }

  /** Whether it holds nothing and remembers nothing: it may be forgotten. */
  isIdle(): boolean {
    const now = this.o.time.nowMs();
    return this.open === 0 && this.queue.length === 0 && now >= this.slowedUntilMs && now >= this.suspendedUntilMs;
  }

  /** Closes every connection and defers every queued message. */
  close(): void {
    this.closed = true;
    this.cancelPump?.();
    for (const w of this.queue.splice(0)) {
      w.cancelWait();
      w.done(this.deferred("the transport is closed"));
    }
    for (const { session, cancel } of this.idle.splice(0)) {
      cancel();
      session.quit();
    }
  }

  /** Starts what may start now: the next messages on idle or new connections, within the limits and the pace. */
  private pump(): void {
    this.cancelPump?.();
    this.cancelPump = undefined;
    while (this.queue.length > 0 && !this.closed) {
      const now = this.o.time.nowMs();
      if (now < this.suspendedUntilMs) {
        this.deferQueue();
        return;
      }
      // Within a millisecond of its turn a message goes (a timer cannot wait less); the turns
      // still add up, so the rate over any minute holds.
      if (this.nextStartMs - now >= 1) {
        this.cancelPump = this.o.time.setTimer(this.nextStartMs - now, () => this.pump());
        return;
      }
      const limits = this.limits();
      const reused = this.idle.pop();
      if (!reused && this.open >= limits.connections) return;
      reused?.cancel();
      if (!reused) this.open++;
      const w = this.queue.shift()!;
      w.cancelWait();
      this.nextStartMs = Math.max(now, this.nextStartMs) + 60_000 / limits.messagesPerMinute;
      void this.run(w, reused?.session);
    }
  }

  /** Sends one message on a reused session (after RSET) or a new one, then gives the session back. */
  private async run(w: Waiting, reused: MxSession | undefined): Promise<void> {
    const attempts: Attempt[] = [];
    let session = reused;
    if (session) {
      try {
        await session.reset();
      } catch {
        // The server closed it while idle, or will not reset: nothing of this message was sent.
        session.close();
        session = undefined;
      }
    }
    session ??= await this.connect(w.job, attempts);
    if (!session) {
      this.open--;
      this.suspendedUntilMs = this.o.time.nowMs() + this.o.suspendMs;
      this.lastConnectFailure = attempts.at(-1) ? describe(attempts.at(-1)!) : "no address to connect to";
      w.done(this.result(attempts, attempts.at(-1)));
      this.pump();
      return;
    }
    const host = session.options.host;
    const address = session.options.address;
    const atMs = this.o.time.nowMs();
    let attempt: Attempt;
    try {
      const reply = await session.send(w.job.returnPath, w.job.recipient, w.job.raw);
      attempt = { atMs, host, address, tls: session.tls, stage: "data", verdict: "delivered", reply, code: 250 };
    } catch (err) {
      attempt = this.failedAttempt(atMs, host, address, session, err);
    }
    attempts.push(attempt);
    if (attempt.reply && matchesAny(attempt.reply, this.o.shaping.rateLimitReplies)) {
      this.slowedUntilMs = this.o.time.nowMs() + this.o.shaping.slowdown.forMs;
    }
    w.done(this.result(attempts, attempt));
    this.release(session);
  }

  /** Opens a session on the first address that gives one, recording each that does not. */
  private async connect(job: Job, attempts: Attempt[]): Promise<MxSession | undefined> {
    let tried = 0;
    for (const host of job.hosts) {
      for (const address of host.addresses) {
        if (tried++ >= this.o.maxAddresses) return undefined;
        const atMs = this.o.time.nowMs();
        try {
          return await MxSession.open({
            host: host.name,
            address,
            port: this.o.port,
            heloName: this.o.heloName,
            tls: this.o.tls,
            timeouts: this.o.timeouts,
            trustedCa: this.o.trustedCa,
          });
        } catch (err) {
          attempts.push(this.failedAttempt(atMs, host.name, address, undefined, err));
        }
      }
    }
    return undefined;
  }

  /** Keeps a session for the next message (or idle for a while), or ends it. */
  private release(session: MxSession): void {
    const reusable =
      session.alive &&
      !this.closed &&
      session.messages < this.limits().messagesPerConnection &&
      this.open <= this.limits().connections;
    if (!reusable) {
      session.quit();
      this.open--;
    } else {
      const cancel = this.o.time.setTimer(this.o.idleMs, () => {
        const i = this.idle.findIndex((s) => s.session === session);
        if (i < 0) return;
        this.idle.splice(i, 1);
        session.quit();
        this.open--;
      });
      this.idle.push({ session, cancel });
    }
    this.pump();
  }

  private failedAttempt(
    atMs: number,
    host: string,
    address: string,
    session: MxSession | undefined,
    err: unknown,
  ): Attempt {
    const f: Failure =
      err instanceof SessionError ? err : { stage: "connect", error: `error: ${(err as Error).message}` };
    const c = classify(f);
    return {
      atMs,
      host,
      address,
      tls: session?.tls ?? "none",
      stage: f.stage,
      verdict: c.verdict,
      reply: f.reply?.text,
      code: f.reply?.code,
      enhanced: f.reply?.enhanced,
      error: f.error,
    };
  }

  private result(attempts: Attempt[], last: Attempt | undefined): MxResult {
    if (!last) return this.deferred("no address to connect to");
    if (last.verdict === "delivered") return { verdict: "delivered", attempts, detail: describe(last) };
    const c = classify({
      stage: last.stage,
      reply: last.code ? { code: last.code, enhanced: last.enhanced, text: last.reply! } : undefined,
      error: last.error,
    });
    return {
      verdict: c.verdict,
      attempts,
      bounce: c.bounce,
      retryAfterMs: c.retryAfterMs,
      detail: describe(last),
    };
  }

  /** A message deferred without an attempt on the wire (the destination suspended, busy or closed). */
  private deferred(why: string): MxResult {
    const now = this.o.time.nowMs();
    const suspended = now < this.suspendedUntilMs;
    const error = suspended ? `${this.o.key} suspended after every address failed: ${this.lastConnectFailure}` : why;
    const attempt: Attempt = {
      atMs: now,
      host: "",
      address: "",
      tls: "none",
      stage: "queue",
      verdict: "temporary",
      error,
    };
    return {
      verdict: "temporary",
      attempts: [attempt],
      bounce: classify({ stage: "queue", error }).bounce,
      retryAfterMs: suspended ? this.suspendedUntilMs - now : undefined,
      detail: describe(attempt),
    };
  }

  private deferQueue(): void {
    for (const w of this.queue.splice(0)) {
      w.cancelWait();
      w.done(this.deferred("suspended"));
    }
  }
}
