import { create } from "@bufbuild/protobuf";
import { domainToASCII } from "node:url";
import type { Clock } from "../clock/clock";
import { generateDkimKey, nextSelectors } from "../dkim/keys";
import { type MasterKey, openPrivateKey, SealedKeyError, sealPrivateKey } from "../dkim/seal";
import { type SigningKey, SigningKeySchema } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Logger } from "../log/log";
import { domainOf } from "../mail/policy";
import type { DkimKeyRow, NewDkimKey } from "../records/domains";
import type { Records } from "../records/records";
import { returnPathFor } from "../returnpath/returnpath";

// What a lease carries for the worker to sign with and to send from: the From domain's active
// DKIM keys, opened (only the worker role leases), and the message's return path. Keys are made
// here, sealed under the master key, when a domain is added (or, for a domain that has none yet,
// when its first message is leased); a start opens every sealed key, and fails when the master
// key cannot: mail is never sent unsigned instead.

/** How long the keys of a domain are kept opened: a rotation's promotion on another daemon is seen within it. */
const KEYS_TTL_MS = 60_000;
/** The cache's bound (domains); it is emptied when it passes it. */
const KEYS_CACHE_MAX = 10_000;
/** The sealed keys a start opens per read. */
const CHECK_PAGE = 500;

export interface SigningOptions {
  records: Pick<Records, "domains">;
  master: MasterKey;
  clock: Clock;
  log: Logger;
  /** RETURN_PATH_SUBDOMAIN. */
  returnPathSubdomain: string;
  /** DKIM_ED25519=1: an Ed25519 key beside each RSA key. */
  ed25519: boolean;
}

export class MasterKeyMismatch extends Error {}

/**
 * Opens every sealed DKIM key of the records; a key the master key cannot open is a
 * MasterKeyMismatch naming its domain and selector (and why), never a partial start.
 */
export async function openAllKeys(records: Pick<Records, "domains">, master: MasterKey): Promise<number> {
  let after: [string, string, string] | undefined;
  let opened = 0;
  for (;;) {
    const page = await records.domains.sealedKeys(after, CHECK_PAGE);
    for (const k of page) {
      try {
        openPrivateKey(k.sealedKey, master);
      } catch (err) {
        if (!(err instanceof SealedKeyError)) throw err;
        throw new MasterKeyMismatch(`the DKIM key ${k.selector} of ${k.domain} cannot be opened: ${err.message}`);
      }
      opened++;
    }
    if (page.length < CHECK_PAGE) return opened;
    const last = page[page.length - 1]!;
    after = [last.orgId, last.domain, last.selector];
  }
}

export class Signing {
  private readonly returnPathKey: Buffer;
  private readonly cache = new Map<string, { keys: SigningKey[]; untilMs: number }>();

  constructor(private readonly o: SigningOptions) {
    this.returnPathKey = o.master.derive("return-path");
  }

  /** New keys for a domain, sealed: RSA, and Ed25519 when turned on; selectors not among `taken`. */
  async newKeys(taken: Iterable<string>, state: "active" | "pending"): Promise<NewDkimKey[]> {
    const selectors = nextSelectors(new Date(this.o.clock.nowMs()), taken);
    const made = [{ selector: selectors.rsa, pair: await generateDkimKey("rsa-sha256") }];
    if (this.o.ed25519) made.push({ selector: selectors.ed25519, pair: await generateDkimKey("ed25519-sha256") });
    return made.map(({ selector, pair }) => ({
      selector,
      algorithm: pair.algorithm,
      publicKey: pair.publicKey,
      sealedKey: sealPrivateKey(pair.privateKey, this.o.master),
      state,
    }));
  }

  /**
   * The keys of an organization's sending domain, its first ones made when it has no active key
   * (a domain added before keys were, or provisioned in a batch); none when it has no such domain.
   */
  async ensureKeys(orgId: string, domain: string): Promise<DkimKeyRow[]> {
    const { domains } = this.o.records;
    const rows = await domains.keys(orgId, domain);
    if (rows.some((k) => k.state === "active") || !(await domains.byName(orgId, domain))) return rows;
    await domains.addKeys(orgId, domain, await this.newKeys([], "active"), this.o.clock.nowMs());
    this.o.log.info("made the DKIM keys of a sending domain", { orgId, domain });
    return domains.keys(orgId, domain);
  }

  /** Forgets what is cached of a domain (its keys changed here). */
  forget(orgId: string, domain: string): void {
    this.cache.delete(`${orgId}\0${domain}`);
  }

  /**
   * The keys a message from fromAddress is signed with: the domain's active keys, opened. A
   * sending domain of the organization that has no key yet gets its first ones now. None for a
   * From domain the organization does not have (a fixture's).
   */
  async keysFor(orgId: string, fromAddress: string): Promise<SigningKey[]> {
    const domain = domainToASCII(domainOf(fromAddress));
    const id = `${orgId}\0${domain}`;
    const now = this.o.clock.nowMs();
    const cached = this.cache.get(id);
    if (cached && cached.untilMs > now) return cached.keys;
    const rows = await this.ensureKeys(orgId, domain);
    const keys = rows.filter((k) => k.state === "active").map((k) => this.opened(domain, k));
    if (this.cache.size >= KEYS_CACHE_MAX) this.cache.clear();
    this.cache.set(id, { keys, untilMs: now + KEYS_TTL_MS });
    return keys;
  }

  /** The envelope sender of a message: at RETURN_PATH_SUBDOMAIN of its From domain, naming it, with its HMAC. */
  returnPath(messageId: string, fromAddress: string): string {
    return returnPathFor(
      messageId,
      domainToASCII(domainOf(fromAddress)),
      this.returnPathKey,
      this.o.returnPathSubdomain,
    );
  }

  private opened(domain: string, k: DkimKeyRow): SigningKey {
    const der = openPrivateKey(k.sealedKey, this.o.master).export({ format: "der", type: "pkcs8" });
    return create(SigningKeySchema, { domain, selector: k.selector, algorithm: k.algorithm, privateKey: der });
  }
}
