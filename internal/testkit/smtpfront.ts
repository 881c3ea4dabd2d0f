// The SMTP front's stages without a socket: a session as smtp-server hands it to the hooks, and
// the front's dependencies and options with safe defaults.
import type { SMTPServerSession } from "smtp-server";
import { logger } from "../log/log";
import type { SmtpDeps, SmtpOptions } from "../smtp/front";

/** A session as smtp-server hands it to the hooks: authenticated nowhere, over TLS, no envelope yet. */
export function smtpSession(o: Partial<SMTPServerSession> = {}): SMTPServerSession {
  return {
    id: "s1",
    localAddress: "127.0.0.1",
    localPort: 587,
    remoteAddress: "192.0.2.1",
    remotePort: 40000,
    clientHostname: "client.test",
    openingCommand: "EHLO",
    hostNameAppearsAs: "client.test",
    envelope: { mailFrom: false, rcptTo: [] },
    secure: true,
    transmissionType: "ESMTPSA",
    tlsOptions: { name: "TLS_AES_256_GCM_SHA384", standardName: "TLS_AES_256_GCM_SHA384", version: "TLSv1.3" },
    xClient: new Map(),
    xForward: new Map(),
    transaction: 1,
    ...o,
  };
}

/** Dependencies that check no token valid and reach no API; override what a test needs. */
export function smtpDeps(o: Partial<SmtpDeps> = {}): SmtpDeps {
  return {
    verifyToken: async () => ({ valid: false }),
    api: { send: async () => ({ kind: "unreachable", reason: "connection refused" }) },
    log: logger("test"),
    ...o,
  };
}

export const SMTP_OPTIONS: SmtpOptions = {
  tls: { cert: "", key: "" },
  maxClients: 10,
  maxClientsPerIp: 2,
  maxWaitingPerIp: 1,
  maxSessionsPerOrg: 2,
  authTimeoutMs: 60_000,
  authFailuresPerIp: 5,
  socketTimeoutMs: 60_000,
  sessionTimeoutMs: 60_000,
  ipv6PrefixBits: 64,
};
