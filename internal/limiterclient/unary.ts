// Unary calls to limiterd in the Connect protocol's JSON form, over one HTTP/2 connection
// (cleartext h2c, or mutual TLS). For short-lived processes such as the admin CLI: it loads
// node:http2 and nothing else, where the Connect client and protobuf-es cost a call several
// times the CPU of Bun's own start. The types come from the generated code as types only, so
// a call is checked against the contract without loading it. The long-running processes use
// the Connect client (client.ts, transport.ts): its binary form and retries are theirs.
import { type ClientHttp2Session, connect, type IncomingHttpHeaders } from "node:http2";
import type { MessageJsonType } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { type ClientCredential, credentialHeaders } from "../plane/secret";
import { isRpcCode, type RpcCode, RpcError } from "./rpcerror";

/** The code of an HTTP status that came without a Connect error body (the Connect protocol's own mapping). */
function codeOfHttpStatus(status: number): RpcCode {
  if (status === 400) return "internal";
  if (status === 401) return "unauthenticated";
  if (status === 403) return "permission_denied";
  if (status === 404) return "unimplemented";
  if ([429, 502, 503, 504].includes(status)) return "unavailable";
  return "unknown";
}

type Methods<S> = S extends GenService<infer M extends GenServiceMethods> ? M : never;

/** A service's unary methods, each taking and answering the JSON form of its messages. */
export type JsonClient<S> = {
  [K in keyof Methods<S> as Methods<S>[K]["methodKind"] extends "unary" ? K : never]: (
    request: MessageJsonType<Methods<S>[K]["input"]>,
  ) => Promise<MessageJsonType<Methods<S>[K]["output"]>>;
};

export interface UnarySession {
  /**
   * The client of one service, by its full name ("mailcore.limiter.v1.DirectoryService"); S is
   * the service's generated descriptor, imported as a type. A method is called by its
   * generated name (createOrganization for the RPC CreateOrganization).
   */
  client<S>(typeName: string): JsonClient<S>;
  /** Closes the connection once the calls under way are answered. */
  close(): void;
}

/** One HTTP/2 connection to baseUrl (https:// with a certificate, http:// with the plane secret), made at the first call. */
export function unarySession(baseUrl: string, cred: ClientCredential): UnarySession {
  const { tls } = cred;
  const credential = credentialHeaders(cred);
  let session: ClientHttp2Session | undefined;
  const open = () => {
    if (session && !session.closed && !session.destroyed) return session;
    const s = connect(baseUrl, tls ? { ca: tls.ca, cert: tls.cert, key: tls.key } : {});
    // A failure of the connection fails the calls on it (each stream reports it); this keeps it from being thrown.
    s.on("error", () => {});
    session = s;
    return s;
  };
  const call = (path: string, request: unknown) =>
    new Promise<unknown>((resolve, reject) => {
      let credentials: Record<string, string>;
      try {
        credentials = credential();
      } catch (err) {
        return reject(new RpcError("unauthenticated", (err as Error).message));
      }
      const stream = open().request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/json",
        "connect-protocol-version": "1",
        ...credentials,
      });
      let headers: IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        headers = h;
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("error", (err) => reject(new RpcError("unavailable", err.message)));
      stream.on("end", () => {
        if (headers === undefined)
          return reject(new RpcError("unavailable", "the connection closed without an answer"));
        const status = Number(headers[":status"]);
        const text = Buffer.concat(chunks).toString("utf8");
        let body: unknown;
        try {
          body = text === "" ? {} : JSON.parse(text);
        } catch {
          body = undefined;
        }
        if (status === 200 && body !== undefined) return resolve(body);
        const err = body as { code?: unknown; message?: unknown } | undefined;
        if (status !== 200 && isRpcCode(err?.code))
          return reject(new RpcError(err.code, typeof err.message === "string" ? err.message : ""));
        reject(
          new RpcError(status === 200 ? "internal" : codeOfHttpStatus(status), `HTTP ${status}: ${text.slice(0, 200)}`),
        );
      });
      stream.end(JSON.stringify(request));
    });
  return {
    client<S>(typeName: string) {
      // The RPC's name is its generated name with the first letter in upper case.
      const method = (name: string) => (request: unknown) =>
        call(`/${typeName}/${name[0]!.toUpperCase()}${name.slice(1)}`, request);
      // No "then": a client is a value that await and Promise.resolve look into.
      return new Proxy(
        {},
        { get: (_, name) => (typeof name === "string" && name !== "then" ? method(name) : undefined) },
      ) as JsonClient<S>;
    },
    close() {
      session?.close();
    },
  };
}
