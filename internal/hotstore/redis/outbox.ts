import type { MessageHistory } from "../../model/history";
import { OUTBOX_PAYLOAD_BYTES, type OutboxStore, type Written } from "../hotstore";
import type { ConfirmedWrites } from "./confirm";
import { keys } from "./layout";
import { type MessageReply, toHistory } from "./mail";

/**
 * The outbox of changed messages, in Redis. Collecting goes through the confirmed writes too: the
 * records are written only with a state the replicas confirmed (one a failover cannot take back).
 */
export class RedisOutbox implements OutboxStore {
  constructor(private readonly writes: ConfirmedWrites) {}

  async changedMessages(max: number): Promise<MessageHistory[]> {
    return ((await this.writes.run("collect", [keys.outbox(), max, OUTBOX_PAYLOAD_BYTES])) as MessageReply[]).map(
      toHistory,
    );
  }

  async settle(written: Written[]): Promise<number> {
    if (written.length === 0) return 0;
    return (await this.writes.run("settle", [
      keys.outbox(),
      ...written.flatMap((w) => [w.orgId, w.id, w.version]),
    ])) as number;
  }
}
