// The bulk import: organizations with their domains, first tokens and console users, from JSON
// lines, in batches of one ProvisionOrganizations call each over the one connection.
import type { ConsoleService } from "../gen/mailcore/limiter/v1/console_pb";
import type { CreateOrganizationRequestJson, DirectoryService } from "../gen/mailcore/limiter/v1/limiter_pb";
import { RpcError } from "../limiterclient/rpcerror";
import type { JsonClient } from "../limiterclient/unary";
import { normalizeEmail } from "../mail/identity";
import { parsePlanJson } from "../plans/json";
import { type Output, orgJson, UsageError } from "./output";

/** Organizations per ProvisionOrganizations call (the daemon takes up to 1000). */
const BATCH = 500;

interface ImportLine {
  /** Its line number in the file, from 1. */
  line: number;
  slug: string;
  request: CreateOrganizationRequestJson;
  users: string[];
}

/** The lines of an import; a line that is not a valid organization is a UsageError naming it. Blank lines are skipped. */
export function parseImport(text: string): ImportLine[] {
  const out: ImportLine[] = [];
  const slugs = new Set<string>();
  text.split("\n").forEach((raw, i) => {
    if (raw.trim() === "") return;
    const bad = (why: string) => new UsageError(`line ${i + 1}: ${why}`);
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(raw);
    } catch {
      throw bad("not JSON");
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw bad("not a JSON object");
    const known = new Set(["slug", "plan", "domains", "token", "tokenName", "users"]);
    const unknown = Object.keys(v).find((k) => !known.has(k));
    if (unknown !== undefined) throw bad(`unknown field ${JSON.stringify(unknown)}`);
    const { slug, token = false, tokenName = "", domains = [], users = [] } = v;
    if (typeof slug !== "string") throw bad("slug must be a string");
    if (slugs.has(slug)) throw bad(`slug ${slug} is in the file twice`);
    slugs.add(slug);
    const plan = typeof v.plan === "string" ? parsePlanJson(v.plan) : undefined;
    if (plan === undefined) throw bad("plan must be free, premium or enterprise");
    if (typeof token !== "boolean") throw bad("token must be true or false");
    if (typeof tokenName !== "string") throw bad("tokenName must be a string");
    if (tokenName !== "" && !token) throw bad("tokenName goes with token: true");
    const isDomain = (d: unknown): d is { name: string; verified?: boolean } =>
      typeof d === "object" &&
      d !== null &&
      typeof (d as { name?: unknown }).name === "string" &&
      ["boolean", "undefined"].includes(typeof (d as { verified?: unknown }).verified);
    if (!Array.isArray(domains) || !domains.every(isDomain))
      throw bad('domains must be a list of {"name": "...", "verified": true|false}');
    if (!Array.isArray(users) || !users.every((u) => typeof u === "string"))
      throw bad("users must be a list of email addresses");
    out.push({
      line: i + 1,
      slug,
      request: {
        slug,
        plan,
        domains: domains.map((d) => ({ name: d.name, verified: d.verified ?? false })),
        withToken: token,
        tokenName,
      },
      users,
    });
  });
  return out;
}

/** The passwords file: one email<TAB>password a line; the email as the daemon normalises it. */
export function parsePasswords(text: string): Map<string, string> {
  const out = new Map<string, string>();
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\r$/, "");
    if (line.trim() === "") return;
    const tab = line.indexOf("\t");
    if (tab <= 0) throw new UsageError(`passwords line ${i + 1}: not email<TAB>password`);
    out.set(normalizeEmail(line.slice(0, tab)), line.slice(tab + 1));
  });
  return out;
}

/**
 * Imports the organizations of text, batch by batch, and prints one JSON result per line of
 * it, in its order. The whole file (and the passwords of its users) is checked before anything
 * is sent. An organization whose slug is taken is reported and left as it is; console users
 * missing from the records are created (so a repeated import completes an interrupted one).
 */
export async function importOrganizations(
  text: string,
  passwordsText: string,
  clients: { directory: JsonClient<typeof DirectoryService>; console: JsonClient<typeof ConsoleService> },
  io: Output,
): Promise<void> {
  const lines = parseImport(text);
  const passwords = parsePasswords(passwordsText);
  for (const l of lines)
    for (const email of l.users)
      if (!passwords.has(normalizeEmail(email)))
        throw new UsageError(`line ${l.line}: no password for console user ${email} (give it with --passwords)`);

  for (let start = 0; start < lines.length; start += BATCH) {
    const batch = lines.slice(start, start + BATCH);
    let results: Awaited<ReturnType<typeof clients.directory.provisionOrganizations>>["results"];
    try {
      ({ results } = await clients.directory.provisionOrganizations({ organizations: batch.map((l) => l.request) }));
    } catch (err) {
      // The daemon counts the organizations of the batch; the reader needs the file's lines.
      if (err instanceof RpcError && err.code === "invalid_argument")
        throw new RpcError(err.code, `lines ${batch[0]!.line}-${batch.at(-1)!.line}: ${err.message}`);
      throw err;
    }
    if (results?.length !== batch.length)
      throw new RpcError(
        "internal",
        `the daemon answered ${results?.length ?? 0} results for ${batch.length} organizations`,
      );
    for (const [i, l] of batch.entries()) {
      const r = results[i]!;
      const users = [];
      for (const email of l.users) users.push(await createUser(clients.console, l.slug, email, passwords));
      io.out(
        JSON.stringify({
          line: l.line,
          created: r.created ?? false,
          ...orgJson(r.organization),
          ...(r.token ? { token: r.token, tokenId: r.tokenId } : {}),
          ...(users.length > 0 ? { users } : {}),
        }),
      );
    }
  }
}

/** Creates a console user; one whose email is taken already is reported as not created. */
async function createUser(
  console: JsonClient<typeof ConsoleService>,
  slug: string,
  email: string,
  passwords: Map<string, string>,
): Promise<{ email: string; created: boolean; userId?: string }> {
  try {
    const { userId } = await console.createUser({ slug, email, password: passwords.get(normalizeEmail(email))! });
    return { email, created: true, userId };
  } catch (err) {
    if (err instanceof RpcError && err.code === "already_exists") return { email, created: false };
    throw err;
  }
}
