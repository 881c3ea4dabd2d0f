// Unary calls of the fronts' hot paths over gRPC without Connect's client: one HTTP/2 stream per
// call on a connection of its own, the body encoded by the caller (a hand codec, or protobuf-es
// without Connect). Connect's client costs a dozen promises and async iterators per call, and its
// session manager re-arms its ping timers on every response and read; on the front's hot paths
// that was most of its CPU beyond Bun.serve.
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  type IncomingHttpHeaders,
  type IncomingHttpStatusHeader,
} from "node:http2";
import { type ClientCredential, credentialHeaders } from "../plane/secret";
import { envelope, unenvelope } from "../wire/grpc";

/** The error a gRPC status in HTTP/2 headers or trailers stands for, as Connect's client reads it; undefined for OK. */
function statusError(h: IncomingHttpHeaders): ConnectError | undefined {
  if (h["grpc-status"] === undefined) return new ConnectError("protocol error: no grpc-status", Code.Internal);
  const headers = new Headers();
  for (const [k, v] of Object.entries(h))
    if (!k.startsWith(":") && v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  return findTrailerError(headers);
}

/** Calls one binary gRPC method; rejects with a ConnectError, within timeoutMs in every case. */
export interface RawCaller<I, O> {
  (input: I, timeoutMs: number): Promise<O>;
  /** Closes the connection (calls under way are cut off); a later call opens a new one. */
  close(): void;
}

/**
 * A unary method at `path` on a connection of its own to the daemon at baseUrl, opened at the
 * first call and again after it closed (a daemon that restarted sends GOAWAY; one that died
 * closes it). No pings: a call that reaches its deadline with nothing read on the connection
 * since it began closes the connection, so a daemon that vanished without a word is left on the
 * next call. With a certificate, baseUrl is https:// and the connection is mutual TLS; otherwise
 * each call carries the plane secret. `encode` makes the request message; `decode` reads the
 * response message of that input (and throws when it does not fit it).
 */
export function rawCaller<I, O>(
  baseUrl: string,
  cred: ClientCredential,
  path: string,
  encode: (input: I) => Uint8Array,
  decode: (message: Buffer, input: I) => O,
): RawCaller<I, O> {
  const credential = credentialHeaders(cred);
  let session: ClientHttp2Session | undefined;
  /** When the connection last delivered a response (performance.now()). */
  let lastReadMs = 0;
  const open = (): ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const s = connect(baseUrl, cred.tls);
    s.on("error", () => {}); // each stream under way fails with it
    const drop = () => {
      if (session === s) session = undefined;
    };
    s.once("close", drop);
    s.once("goaway", () => {
      drop();
      s.close(); // the calls under way finish
    });
    s.unref(); // an idle connection keeps no process alive; a call under way has its timer
    session = s;
    return s;
  };
  const call = (input: I, timeoutMs: number) =>
    new Promise<O>((resolve, reject) => {
      const startedMs = performance.now();
      let s: ClientHttp2Session;
      let stream: ClientHttp2Stream;
      try {
        s = open();
        stream = s.request({
          ":method": "POST",
          ":path": path,
          "content-type": "application/grpc+proto",
          te: "trailers",
          "grpc-timeout": `${timeoutMs}m`,
          ...credential(),
        });
      } catch (err) {
        return reject(
          new ConnectError(`cannot open a stream to the daemon: ${(err as Error).message}`, Code.Unavailable),
        );
      }
      let settled = false;
      const finish = (err: unknown, out?: O) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err === undefined) return resolve(out!);
        if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
        reject(ConnectError.from(err));
      };
      const timer = setTimeout(() => {
        if (lastReadMs < startedMs) s.destroy(); // nothing came back since this call began
        finish(new ConnectError(`no answer within ${timeoutMs} ms`, Code.DeadlineExceeded));
      }, timeoutMs);
      let response: (IncomingHttpHeaders & IncomingHttpStatusHeader) | undefined;
      let trailers: IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        response = h;
        lastReadMs = performance.now();
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("trailers", (t) => {
        trailers = t;
      });
      stream.on("error", (e) => finish(new ConnectError(e.message, Code.Unavailable)));
      stream.on("close", () => {
        if (response === undefined)
          return finish(
            new ConnectError(`stream closed without a response (HTTP/2 code ${stream.rstCode})`, Code.Unavailable),
          );
        const status = response[":status"] ?? 0;
        if (status !== 200) return finish(new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status)));
        // A status in the headers is a trailers-only answer, which carries no message.
        if (response["grpc-status"] !== undefined)
          return finish(statusError(response) ?? new ConnectError("protocol error: trailers-only OK", Code.Internal));
        if (trailers?.["grpc-status"] !== "0") {
          const err = statusError(trailers ?? {});
          if (err) return finish(err);
        }
        try {
          finish(undefined, decode(unenvelope(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)), input));
        } catch (e) {
          finish(e);
        }
      });
      stream.end(envelope(encode(input)));
    });
  return Object.assign(call, {
    close: () => {
      session?.destroy();
      session = undefined;
    },
  });
}
