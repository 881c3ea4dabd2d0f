import type { MessageHistory } from "../../model/history";
import { OUTBOX_PAYLOAD_BYTES, type OutboxStore, type Written } from "../hotstore";
import { keys } from "./layout";
import { type MessageReply, toHistory } from "./mail";
import type { ScriptedRedis } from "./scripts";

/** The outbox of changed messages, in Redis. */
export class RedisOutbox implements OutboxStore {
  constructor(private readonly redis: ScriptedRedis) {}

  async changedMessages(max: number): Promise<MessageHistory[]> {
    return ((await this.redis.collect(keys.outbox(), max, OUTBOX_PAYLOAD_BYTES)) as MessageReply[]).map(toHistory);
  }

  async settle(written: Written[]): Promise<number> {
    if (written.length === 0) return 0;
    return (await this.redis.settle(keys.outbox(), ...written.flatMap((w) => [w.orgId, w.id, w.version]))) as number;
  }
}
