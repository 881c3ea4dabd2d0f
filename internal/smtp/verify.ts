import type { Client } from "@connectrpc/connect";
import type { DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { VerifyResult } from "./front";

/** The daemon's one call the SMTP front makes. */
export type TokenCalls = Pick<Client<typeof DirectoryService>, "verifyToken">;

/** DirectoryService.VerifyToken as AUTH asks it: a token checked without counting it against any limit; unavailable when the daemon does not answer in time. */
export function tokenVerifier(directory: TokenCalls, timeoutMs: number): (token: string) => Promise<VerifyResult> {
  return async (token) => {
    try {
      const r = await directory.verifyToken({ token }, { timeoutMs });
      return r.valid ? { valid: true, orgId: r.orgId, orgSlug: r.orgSlug } : { valid: false };
    } catch {
      return { unavailable: true };
    }
  };
}
