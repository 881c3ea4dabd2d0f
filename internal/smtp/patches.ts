// Two patches of smtp-server's SMTPConnection, each applied once per process: replies keep our
// own enhanced status codes, and the greeting is not held for every client.
import { createRequire } from "node:module";
import type { SMTPServer } from "smtp-server";
import { SMTPConnection } from "smtp-server/lib/smtp-connection.js";

const ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;
const PATCHED = Symbol.for("mailcore.smtp.ownEnhancedCodes");

/**
 * smtp-server derives the enhanced status code of a handler's error from its basic code
 * alone (every 550 becomes 5.1.1, every 452 4.2.2). Our replies carry their own, more
 * precise one at the start of the text ("5.7.1 Sender refused: ..."); such a reply is sent
 * as written. Replies of the library itself keep the library's code.
 */
export function keepOwnEnhancedCodes(): void {
  const proto = SMTPConnection.prototype as SMTPConnection & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const send = proto.send;
  proto.send = function (
    this: SMTPConnection,
    code: number,
    data?: string | string[] | null,
    context?: string | false,
  ) {
    return send.call(this, code, data, typeof data === "string" && ENHANCED.test(data) ? false : context);
  };
  proto[PATCHED] = true;
}

const GREETING_PATCHED = Symbol.for("mailcore.smtp.greetingAtOnce");
/** The smtp-server release whose SMTPConnection.init() greetAtOnce() replaces. */
export const GREETING_PATCH_FOR = "3.21.6";
export const installedSmtpServer: string = createRequire(import.meta.url)("smtp-server/package.json").version;

/** The private members of SMTPConnection that init() uses. */
type ConnectionInternals = SMTPConnection & {
  _setListeners(callback: () => void): void;
  _server: SMTPServer;
  name: string;
};

/**
 * smtp-server holds every greeting 100 ms in SMTPConnection.init() (a hard-coded pause to
 * catch clients that talk before the greeting; no option turns it off). A submission port
 * does not need it for every client: onConnect pauses the greeting where it matters. This is
 * the library's init() without the pause; whatever a client sends before its greeting is
 * still refused by the library ("421 You talk too soon"), also while onConnect holds the
 * greeting. Applied only to the release it was written against; false otherwise (the pause stays).
 */
export function greetAtOnce(): boolean {
  const proto = SMTPConnection.prototype as ConnectionInternals & { [GREETING_PATCHED]?: true };
  if (proto[GREETING_PATCHED]) return true;
  if (installedSmtpServer !== GREETING_PATCH_FOR) return false;
  proto.init = function (this: ConnectionInternals) {
    this._setListeners(() => {
      const { maxClients } = this._server.options;
      if (maxClients && this._server.connections.size > maxClients)
        return this.send(421, `${this.name} Too many connected clients, try again in a moment`, false);
      this.connectionReady();
    });
  };
  proto[GREETING_PATCHED] = true;
  return true;
}
