// LimiterService.AdmitBatch over gRPC without Connect's client: one HTTP/2 stream per call
// on the session the other clients share, the body encoded by the hand codec. Connect's
// client costs a dozen promises and async iterators per call and protobuf-es reflection
// per admission; on the front's hot path that was most of its CPU beyond Bun.serve.
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { type ClientHttp2Stream, constants, type IncomingHttpHeaders, type IncomingHttpStatusHeader } from "node:http2";
import { LimiterService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type Admission, type AdmitCall, decodeAdmitBatchResponse, encodeAdmitBatchRequest } from "../wire/admit";
import { envelope, unenvelope } from "../wire/grpc";

export const ADMIT_BATCH_PATH = `/${LimiterService.typeName}/${LimiterService.method.admitBatch.name}`;

/** The error a gRPC status in HTTP/2 headers or trailers stands for, as Connect's client reads it; undefined for OK. */
function statusError(h: IncomingHttpHeaders): ConnectError | undefined {
  if (h["grpc-status"] === undefined) return new ConnectError("protocol error: no grpc-status", Code.Internal);
  const headers = new Headers();
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  return findTrailerError(headers);
}

/** Calls AdmitBatch; rejects with a ConnectError, within timeoutMs in every case. */
export function admitBatchCaller(session: Http2SessionManager): (calls: readonly AdmitCall[], timeoutMs: number) => Promise<Admission[]> {
  return (calls, timeoutMs) =>
    new Promise<Admission[]>((resolve, reject) => {
      let stream: ClientHttp2Stream | undefined;
      let settled = false;
      const finish = (err: unknown, out?: Admission[]) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err === undefined) return resolve(out!);
        if (stream && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
        reject(ConnectError.from(err));
      };
      const timer = setTimeout(() => finish(new ConnectError(`no answer within ${timeoutMs} ms`, Code.DeadlineExceeded)), timeoutMs);
      const headers = { "content-type": "application/grpc+proto", te: "trailers", "grpc-timeout": `${timeoutMs}m` };
      session.request("POST", ADMIT_BATCH_PATH, headers, {}).then((s) => {
        stream = s;
        if (settled) return void s.close(constants.NGHTTP2_CANCEL);
        let response: (IncomingHttpHeaders & IncomingHttpStatusHeader) | undefined;
        let trailers: IncomingHttpHeaders | undefined;
        const chunks: Buffer[] = [];
        s.on("response", (h) => {
          response = h;
          session.notifyResponseByteRead(s);
        });
        s.on("data", (chunk: Buffer) => {
          chunks.push(chunk);
          session.notifyResponseByteRead(s);
        });
        s.on("trailers", (t) => {
          trailers = t;
        });
        s.on("error", (e) => finish(e));
        s.on("close", () => {
          if (response === undefined) return finish(new ConnectError(`stream closed without a response (HTTP/2 code ${s.rstCode})`, Code.Unavailable));
          const status = response[":status"] ?? 0;
          if (status !== 200) return finish(new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status)));
          // A status in the headers is a trailers-only answer, which carries no message.
          const err = response["grpc-status"] !== undefined ? (statusError(response) ?? new ConnectError("protocol error: trailers-only OK", Code.Internal)) : statusError(trailers ?? {});
          if (err) return finish(err);
          try {
            const out = decodeAdmitBatchResponse(unenvelope(Buffer.concat(chunks)));
            if (out.length !== calls.length) throw new ConnectError(`a batch of ${calls.length} answered with ${out.length}`, Code.Internal);
            finish(undefined, out);
          } catch (e) {
            finish(e);
          }
        });
        s.end(envelope(encodeAdmitBatchRequest(calls)));
      }, finish);
    });
}
