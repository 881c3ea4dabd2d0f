// SendBatchService.SendBatch over gRPC without Connect's client (rawcall.ts), the messages in
// protobuf-es's binary form: the sends of a front, coalesced, each answered on its own.
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  SendBatchRequestSchema,
  SendBatchResponseSchema,
  type SendResult,
  type TicketedSendSchema,
} from "../gen/mailcore/limiter/v1/send_batch_pb";
import type { ClientCredential } from "../plane/secret";
import { SEND_BATCH_PATH } from "../wire/send_batch";
import { type RawCaller, rawCaller } from "./rawcall";

/** A batch as the front sends it: the sends, each with its admission ticket, and the time after which the daemon queues none of them. */
export interface SendBatch {
  sends: MessageInitShape<typeof TicketedSendSchema>[];
  deadlineMs: number;
}

/** Calls SendBatch; the results in the order of the sends. Rejects with a ConnectError, within timeoutMs in every case. */
export type SendBatchCaller = RawCaller<SendBatch, SendResult[]>;

/** SendBatch on a connection of its own to the daemon at baseUrl (see rawCaller). */
export function sendBatchCaller(baseUrl: string, cred: ClientCredential): SendBatchCaller {
  return rawCaller(
    baseUrl,
    cred,
    SEND_BATCH_PATH,
    (batch: SendBatch) =>
      toBinary(
        SendBatchRequestSchema,
        create(SendBatchRequestSchema, { sends: batch.sends, deadlineMs: BigInt(batch.deadlineMs) }),
      ),
    (message, batch) => {
      const { results } = fromBinary(SendBatchResponseSchema, message);
      if (results.length !== batch.sends.length)
        throw new ConnectError(`a batch of ${batch.sends.length} sends answered with ${results.length}`, Code.Internal);
      return results;
    },
  );
}
