// AUTH's one question to the daemon, with DirectoryService in this process.
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { expect, test } from "bun:test";
import { DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { tokenVerifier } from "./verify";

const GOOD = `mc_${"g".repeat(43)}`;
const directory = (down = false) =>
  createClient(
    DirectoryService,
    createRouterTransport(({ service }) =>
      service(DirectoryService, {
        verifyToken: ({ token }) => {
          if (down) throw new ConnectError("store down", Code.Unavailable);
          return token === GOOD ? { valid: true, orgId: "org_1", orgSlug: "acme" } : { valid: false };
        },
      }),
    ),
  );

test("a token is valid for its organization, or not; a daemon that does not answer is unavailable, not a no", async () => {
  const verify = tokenVerifier(directory(), 1_000);
  expect(await verify(GOOD)).toEqual({ valid: true, orgId: "org_1", orgSlug: "acme" });
  expect(await verify(`mc_${"b".repeat(43)}`)).toEqual({ valid: false });
  expect(await tokenVerifier(directory(true), 1_000)(GOOD)).toEqual({ unavailable: true });
});
