import { joinTags, type MessageHistory } from "../../model/history";
import { LANES } from "../../mail/policy";
import type { MessageRef, Presence, ReconcileStore, RestoreResult, Written } from "../hotstore";
import type { ConfirmedWrites } from "./confirm";
import { keys } from "./layout";
import type { ScriptedRedis } from "./scripts";

/**
 * The reconciliation's side of Redis: what it has of messages, and putting back what it lost.
 * Putting back and dropping change messages: they go through the confirmed writes, as every change does.
 */
export class RedisReconcile implements ReconcileStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly writes: ConfirmedWrites,
  ) {}

  async presence(messages: MessageRef[]): Promise<Presence[]> {
    if (messages.length === 0) return [];
    return (await this.redis.presence(keys.outbox(), ...messages.flatMap((m) => [m.orgId, m.id]))) as Presence[];
  }

  async restore(messages: MessageHistory[], nowMs: number): Promise<RestoreResult> {
    if (messages.length === 0) return { requeued: 0, finished: 0 };
    // Numbers as strings: Lua's numbers would print large times in exponent form.
    const json = messages.map((m) =>
      JSON.stringify({
        id: m.id,
        orgId: m.orgId,
        lane: String(m.lane),
        from: m.from,
        to: m.to,
        toMailbox: m.toMailbox,
        subject: m.subject,
        tags: joinTags(m.tags),
        attempts: String(m.attempts),
        createdMs: String(m.createdMs),
        payload: m.payload ?? "",
        events: m.events.map((e) => ({ status: String(e.status), atMs: String(e.atMs), detail: e.detail })),
        tries: (m.deliveryAttempts ?? []).map((a) => JSON.stringify(a)),
      }),
    );
    const [requeued, finished] = (await this.writes.run("putback", [keys.outbox(), nowMs, ...json])) as [
      number,
      number,
    ];
    return { requeued, finished };
  }

  async unfinishedHere(): Promise<Written[]> {
    const reply = (await this.redis.listing(keys.outbox(), ...LANES)) as [string, string, number][];
    return reply.map(([orgId, id, version]) => ({ orgId, id, version }));
  }

  async drop(stale: Written[]): Promise<number> {
    if (stale.length === 0) return 0;
    return (await this.writes.run("drop", [
      keys.outbox(),
      ...stale.flatMap((w) => [w.orgId, w.id, w.version]),
    ])) as number;
  }
}
