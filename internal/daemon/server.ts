import {
  Code,
  type ConnectRouter,
  ConnectError,
  createContextKey,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import { parseContentType, parseTimeout } from "@connectrpc/connect/protocol-grpc";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import type { TLSSocket } from "node:tls";
import type { Authorize } from "../plane/roles";
import { bearerMatcher, PLANE_SECRET_HEADER } from "../plane/secret";
import { type Peer, peerOf, type ServerTls } from "../plane/tls";
import { envelope, unenvelope } from "../wire/grpc";

export interface RpcServer {
  port: number;
  /**
   * Stops taking connections and calls, lets the calls under way finish (end long-lived
   * streams first), and cuts off whatever is still open after graceMs.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * A unary method served from its bytes: the request message in, the response message out.
 * For the hot path only; every other call goes through Connect's router.
 */
export type RawUnary = (request: Buffer) => Promise<Uint8Array>;

/** The largest request a raw method reads (a full AdmitBatch is about 70 KB). */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** As Connect's handlers: a grpc-timeout beyond this is refused. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export interface RpcOptions {
  interceptors?: Interceptor[];
  /** Aborting it ends every call under way (long-lived lease streams at shutdown). */
  shutdownSignal?: AbortSignal;
  /**
   * Methods (by path) answered in binary gRPC (application/grpc, application/grpc+proto) by
   * serveRpc itself, with the framing, status, trailers and deadline of the gRPC protocol, and
   * without the interceptors; the same path in JSON, gRPC-Web or Connect goes to the router.
   */
  raw?: Record<string, RawUnary>;
  /**
   * Mutual TLS: only clients with a certificate from tls.clientCa get through the handshake
   * (each one refused is told to handshakeRefused), and authorize decides, per call, whether
   * the certificate's holder may make it.
   */
  tls?: ServerTls & { authorize: Authorize; handshakeRefused(err: Error, remoteAddress: string | undefined): void };
  /**
   * Without tls: the plane secret (plane/secret.ts) every call must carry as a bearer token;
   * each call refused is told to refused. Unset: a cleartext port open to every caller (tests
   * of this server alone; limiterd always sets it).
   */
  secret?: { value: string; refused(path: string): void };
}

/** The verified client certificate's holder, for the authorizing interceptor (undefined without TLS). */
const PEER = createContextKey<Peer | undefined>(undefined, { description: "the client certificate's holder" });

/** On a TLS port: the refusal of a call by its path, for the client (a call without a verified client is refused). */
function refusal(authorize: Authorize, path: string, peer: Peer | undefined): ConnectError | undefined {
  return peer ? authorize(path, peer) : new ConnectError("no verified client certificate", Code.PermissionDenied);
}

/** Refuses a call that the client's certificate does not allow, before any handler sees it. */
function authorizing(authorize: Authorize): Interceptor {
  return (next) => async (req) => {
    const refused = refusal(authorize, `/${req.service.typeName}/${req.method.name}`, req.contextValues.get(PEER));
    if (refused) throw refused;
    return next(req);
  };
}

/** On a cleartext port: the refusal of a call without the plane secret, undefined for one with it. */
type SecretCheck = (path: string, authorization: string | null | undefined) => ConnectError | undefined;

function secretCheck(secret: NonNullable<RpcOptions["secret"]>): SecretCheck {
  const matches = bearerMatcher(secret.value);
  return (path, authorization) => {
    if (matches(authorization)) return undefined;
    secret.refused(path);
    return new ConnectError(
      "this port takes calls with the plane secret only (DATA_DIR/plane.secret, sent as a bearer token)",
      Code.Unauthenticated,
    );
  };
}

/** Refuses a call without the plane secret, before any handler sees it. */
function withSecret(check: SecretCheck): Interceptor {
  return (next) => async (req) => {
    const refused = check(`/${req.service.typeName}/${req.method.name}`, req.header.get(PLANE_SECRET_HEADER));
    if (refused) throw refused;
    return next(req);
  };
}

/**
 * Serves Connect, gRPC and gRPC-Web on one HTTP/2 port, cleartext or (with o.tls) mutual TLS
 * only. node:http2, not Bun.serve: gRPC needs trailers, which Bun.serve cannot send.
 */
export async function serveRpc(
  routes: (router: ConnectRouter) => void,
  host: string,
  port: number,
  o: RpcOptions = {},
): Promise<RpcServer> {
  const tls = o.tls;
  const secret = !tls && o.secret ? secretCheck(o.secret) : undefined;
  /** Each TLS connection's verified client, read once when the connection is made. */
  const peers = new WeakMap<ServerHttp2Session, Peer>();
  const peerOfRequest = (req: Http2ServerRequest) => peers.get(req.stream.session as ServerHttp2Session);
  // No compression: the daemon's messages are small and local; gzip cost more CPU than it saved.
  const connect = connectNodeAdapter({
    routes,
    acceptCompression: [],
    // Authorization outermost: nothing else runs for a call the certificate (or, in cleartext,
    // the plane secret) does not allow.
    interceptors: [
      ...(tls ? [authorizing(tls.authorize)] : secret ? [withSecret(secret)] : []),
      ...(o.interceptors ?? []),
    ],
    shutdownSignal: o.shutdownSignal,
    contextValues: tls ? (req) => createContextValues().set(PEER, peerOfRequest(req as Http2ServerRequest)) : undefined,
  });
  const raw = o.raw ?? {};
  const handle = (req: Http2ServerRequest, res: Http2ServerResponse) => {
    const method = raw[req.url];
    const type = req.headers["content-type"];
    if (method !== undefined && req.method === "POST" && parseContentType(type ?? null)?.binary === true) {
      const refused = tls
        ? refusal(tls.authorize, req.url, peerOfRequest(req))
        : secret?.(req.url, req.headers[PLANE_SECRET_HEADER]);
      serveUnary(req, res, type!, method, refused);
    } else {
      void connect(req, res);
    }
  };
  // allowHTTP1 off: a TLS client that does not negotiate h2 by ALPN is refused.
  const server: Http2Server | Http2SecureServer = tls
    ? createSecureServer(
        { cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: true, rejectUnauthorized: true },
        handle,
      )
    : createServer(handle);
  if (tls)
    server.on("tlsClientError", (err: Error, socket: TLSSocket) => tls.handshakeRefused(err, socket.remoteAddress));
  /** Open sessions and the calls under way on each. */
  const sessions = new Map<ServerHttp2Session, number>();
  let closing = false;
  server.on("session", (session: ServerHttp2Session) => {
    sessions.set(session, 0);
    if (tls) peers.set(session, peerOf((session.socket as TLSSocket).getPeerCertificate()));
    session.once("close", () => sessions.delete(session));
  });
  server.on("stream", (stream: ServerHttp2Stream) => {
    const session = stream.session as ServerHttp2Session | undefined;
    if (!session) return;
    sessions.set(session, (sessions.get(session) ?? 0) + 1);
    stream.once("close", () => {
      const left = (sessions.get(session) ?? 1) - 1;
      sessions.set(session, left);
      // A closing server lets each connection go as soon as its last call is answered.
      if (closing && left === 0) session.destroy();
    });
  });
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => done());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: (graceMs = 2_000) =>
      new Promise((done) => {
        closing = true;
        server.close(() => done());
        // GOAWAY: clients open no new calls here; the ones under way finish.
        for (const [session, calls] of sessions) {
          if (calls === 0) session.destroy();
          else session.close();
        }
        setTimeout(() => {
          for (const session of sessions.keys()) session.destroy();
        }, graceMs).unref();
      }),
  };
}

/**
 * grpc-message as the gRPC protocol spells it: UTF-8, with every byte outside 0x20-0x7E
 * and "%" percent-encoded (encodeURIComponent encodes more, which @grpc/grpc-js leaves as is).
 */
export function percentEncode(message: string): string {
  let out = "";
  for (const b of Buffer.from(message, "utf8"))
    out +=
      b < 0x20 || b > 0x7e || b === 0x25 ? `%${b.toString(16).toUpperCase().padStart(2, "0")}` : String.fromCharCode(b);
  return out;
}

/** Answers one raw call; when refused, answers that error without reading the request. */
function serveUnary(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  contentType: string,
  method: RawUnary,
  refused: ConnectError | undefined,
): void {
  let answered = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const answer = (message: Uint8Array | undefined, status: { "grpc-status": string; "grpc-message"?: string }) => {
    if (answered) return;
    answered = true;
    clearTimeout(timer);
    res.writeHead(200, { "content-type": contentType });
    res.addTrailers(status);
    if (message) res.end(envelope(message));
    else res.end();
  };
  // Headers and trailers, no message: what Connect's handlers send for an error too.
  const fail = (err: ConnectError) =>
    answer(undefined, { "grpc-status": String(err.code), "grpc-message": percentEncode(err.rawMessage) });
  if (refused) {
    fail(refused);
    return;
  }
  const encoding = req.headers["grpc-encoding"];
  if (encoding !== undefined && encoding !== "identity") {
    fail(new ConnectError(`unsupported compression ${encoding}`, Code.Unimplemented));
    return;
  }
  const deadline = parseTimeout((req.headers["grpc-timeout"] as string | undefined) ?? null, MAX_TIMEOUT_MS);
  if (deadline.error) {
    fail(deadline.error);
    return;
  }
  if (deadline.timeoutMs !== undefined)
    timer = setTimeout(() => fail(new ConnectError("the deadline passed", Code.DeadlineExceeded)), deadline.timeoutMs);
  // A client that gives up (RST_STREAM) gets nothing more.
  res.on("close", () => {
    answered = true;
    clearTimeout(timer);
  });

  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES)
      fail(new ConnectError(`a request of more than ${MAX_REQUEST_BYTES} bytes`, Code.ResourceExhausted));
    else chunks.push(chunk);
  });
  req.on("end", () => {
    if (answered) return;
    let request: Buffer;
    try {
      request = unenvelope(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    } catch (err) {
      return fail(new ConnectError((err as Error).message, Code.InvalidArgument));
    }
    method(request).then(
      (response) => answer(response, { "grpc-status": "0" }),
      (err) => fail(ConnectError.from(err)),
    );
  });
}
