import { domainToASCII } from "node:url";

// A domain name as the records keep it: lower-case ASCII, an internationalized name as punycode,
// no final dot. The API's contract check (the document's format domain-name) and the daemon's
// checks use this one rule, so a name the document admits is one the daemon takes.

/** Labels of ASCII letters, digits and inner hyphens, 253 characters at most, the last label starting with a letter. */
export const ASCII_DOMAIN_NAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$/;

/** The name as stored (trimmed, lower-cased, without a final dot, an IDN as punycode); undefined when it is not a domain name. */
export function storedDomainName(input: string): string | undefined {
  const trimmed = input.trim().replace(/\.$/, "").toLowerCase();
  const ascii = trimmed === "" ? "" : domainToASCII(trimmed);
  return ASCII_DOMAIN_NAME.test(ascii) ? ascii : undefined;
}
