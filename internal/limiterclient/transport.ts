import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { ClientTls } from "../plane/tls";

/**
 * gRPC to the daemon over one HTTP/2 connection, pinged while idle and re-established by the
 * session manager after the daemon restarts; mutual TLS when tls is given (baseUrl https://).
 * Apart from the clients, so that a caller of a few services loads only their generated code.
 */
export function limiterTransport(baseUrl: string, tls?: ClientTls): Transport {
  const session = new Http2SessionManager(baseUrl, { pingIntervalMs: 5_000, pingTimeoutMs: 2_000 }, tls);
  return createGrpcTransport({ baseUrl, sessionManager: session, acceptCompression: [] });
}
