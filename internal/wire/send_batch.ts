// SendBatchService.SendBatch (proto/mailcore/limiter/v1/send_batch.proto): the path the front
// calls and the daemon serves outside Connect's router, and the largest batch either side allows.
import { SendBatchService } from "../gen/mailcore/limiter/v1/send_batch_pb";

export const SEND_BATCH_PATH = `/${SendBatchService.typeName}/${SendBatchService.method.sendBatch.name}`;

/** The most sends one SendBatch call may carry: fronts batch up to it, the daemon refuses more. */
export const MAX_SEND_BATCH = 256;
