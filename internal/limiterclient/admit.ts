// LimiterService.AdmitBatch over gRPC without Connect's client (rawcall.ts), the body encoded by
// the hand codec (internal/wire/admit.ts).
import { Code, ConnectError } from "@connectrpc/connect";
import type { ClientCredential } from "../plane/secret";
import {
  ADMIT_BATCH_PATH,
  type Admission,
  type AdmitCall,
  decodeAdmitBatchResponse,
  encodeAdmitBatchRequest,
} from "../wire/admit";
import { type RawCaller, rawCaller } from "./rawcall";

/** Calls AdmitBatch; rejects with a ConnectError, within timeoutMs in every case. */
export type AdmitBatchCaller = RawCaller<readonly AdmitCall[], Admission[]>;

/** AdmitBatch on a connection of its own to the daemon at baseUrl (see rawCaller). */
export function admitBatchCaller(baseUrl: string, cred: ClientCredential): AdmitBatchCaller {
  return rawCaller(baseUrl, cred, ADMIT_BATCH_PATH, encodeAdmitBatchRequest, (message, calls) => {
    const out = decodeAdmitBatchResponse(message);
    if (out.length !== calls.length)
      throw new ConnectError(`a batch of ${calls.length} answered with ${out.length}`, Code.Internal);
    return out;
  });
}
