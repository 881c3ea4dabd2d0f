import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { ClientTls } from "../plane/tls";

/**
 * One HTTP/2 connection to the daemon, pinged while idle and re-established by the session
 * manager after the daemon restarts; mutual TLS when tls is given (baseUrl https://).
 */
export function limiterSession(baseUrl: string, tls?: ClientTls): Http2SessionManager {
  return new Http2SessionManager(baseUrl, { pingIntervalMs: 5_000, pingTimeoutMs: 2_000 }, tls);
}

/**
 * gRPC to the daemon, over the given session or a new one. Apart from the clients, so that a
 * caller of a few services loads only their generated code.
 */
export function limiterTransport(
  baseUrl: string,
  tls?: ClientTls,
  o: { session?: Http2SessionManager; interceptors?: Interceptor[] } = {},
): Transport {
  return createGrpcTransport({
    baseUrl,
    sessionManager: o.session ?? limiterSession(baseUrl, tls),
    acceptCompression: [],
    interceptors: o.interceptors,
  });
}
