import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { createServer, type Http2Server } from "node:http2";

export interface RpcServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves Connect, gRPC and gRPC-Web on one cleartext HTTP/2 port. node:http2, not
 * Bun.serve: gRPC needs trailers, which Bun.serve cannot send.
 */
export async function serveRpc(routes: (router: ConnectRouter) => void, host: string, port: number): Promise<RpcServer> {
  // No compression: the daemon's messages are small and local; gzip cost more CPU than it saved.
  const server: Http2Server = createServer(connectNodeAdapter({ routes, acceptCompression: [] }));
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => done());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise((done) => server.close(() => done())),
  };
}
