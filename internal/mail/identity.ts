// Apart from the sending rules (policy.ts), which load the generated code: the admin CLI's import
// compares emails as the daemon does and loads nothing else.

/** How an email address is compared as an identity (a subscriber, a console user): trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
