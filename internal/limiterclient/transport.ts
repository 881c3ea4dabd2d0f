import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { type ClientCredential, credentialHeaders } from "../plane/secret";

/**
 * One HTTP/2 connection to the daemon, pinged while idle and re-established by the session
 * manager after the daemon restarts; mutual TLS when the credential is a certificate (baseUrl https://).
 */
export function limiterSession(baseUrl: string, cred: ClientCredential): Http2SessionManager {
  return new Http2SessionManager(baseUrl, { pingIntervalMs: 5_000, pingTimeoutMs: 2_000 }, cred.tls);
}

/** Adds the credential's metadata (the plane secret on cleartext) to every call. */
function credentialInterceptor(cred: ClientCredential): Interceptor {
  const headers = credentialHeaders(cred);
  return (next) => async (req) => {
    for (const [name, value] of Object.entries(headers())) req.header.set(name, value);
    return next(req);
  };
}

/**
 * gRPC to the daemon, over the given session or a new one. Apart from the clients, so that a
 * caller of a few services loads only their generated code.
 */
export function limiterTransport(
  baseUrl: string,
  cred: ClientCredential,
  o: { session?: Http2SessionManager; interceptors?: Interceptor[] } = {},
): Transport {
  return createGrpcTransport({
    baseUrl,
    sessionManager: o.session ?? limiterSession(baseUrl, cred),
    acceptCompression: [],
    interceptors: [...(cred.tls ? [] : [credentialInterceptor(cred)]), ...(o.interceptors ?? [])],
  });
}
