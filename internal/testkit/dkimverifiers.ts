// DKIM verifiers nobody on the project wrote, for the tests of our signatures: Debian's dkimpy
// (python3-dkim, with PyNaCl for Ed25519) and Perl's Mail::DKIM (libmail-dkim-perl). Each
// reads messages on its standard input (a JSON list of base64), looks the keys up in the DNS
// server given (the tests' own, testkit/dns.ts), and reports every DKIM-Signature of each
// message as JSON. One process checks a test's messages together: starting one is most of
// the cost.

export interface VerifiedSignature {
  /** "pass", or the verifier's word for what went wrong ("fail", "invalid", "neutral"...). */
  result: string;
  /** Why, in the verifier's words (empty on a pass). */
  detail: string;
  domain: string;
  selector: string;
  algorithm: string;
  /** h=, lower-cased, in order. */
  headers: string[];
}

/** The signatures of each message, in the messages' order. */
export type Verifier = (messages: Buffer[], dnsServer: string) => Promise<VerifiedSignature[][]>;

// dkim.DKIM.verify(idx) checks a message's signature idx; its logger says why one fails.
const DKIMPY = `
import sys, json, base64, logging, dkim, dns.resolver
host, port = sys.argv[1].rsplit(":", 1)
resolver = dns.resolver.Resolver(configure=False)
resolver.nameservers = [host]
resolver.port = int(port)
resolver.lifetime = 5
def txt(name, timeout=5):
    try:
        answer = resolver.resolve(name.decode(), "TXT")
    except Exception:
        return None
    return b"".join(answer[0].strings)
class Reasons(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []
    def emit(self, record):
        self.lines.append(record.getMessage())
def check(message):
    signatures = [value for name, value in dkim.DKIM(message).headers if name.lower() == b"dkim-signature"]
    out = []
    for idx in range(len(signatures)):
        reasons = Reasons()
        logger = logging.getLogger("dkimpy-%d" % idx)
        logger.handlers = [reasons]
        logger.setLevel(logging.INFO)
        logger.propagate = False
        d = dkim.DKIM(message, logger=logger)
        try:
            ok = d.verify(idx=idx, dnsfunc=txt)
        except Exception as e:
            ok = False
            reasons.lines.append(str(e))
        sig = dkim.util.parse_tag_value(signatures[idx])
        out.append({
            "result": "pass" if ok else "fail",
            "detail": "" if ok else "; ".join(reasons.lines) or "the signature does not verify",
            "domain": sig.get(b"d", b"").decode(),
            "selector": sig.get(b"s", b"").decode(),
            "algorithm": sig.get(b"a", b"").decode(),
            "headers": [h.strip().lower() for h in sig.get(b"h", b"").decode().split(":") if h.strip()],
        })
    return out
print(json.dumps([check(base64.b64decode(m)) for m in json.load(sys.stdin)]))
`;

// A Mail::DKIM::Verifier per message reports each of its signatures; the resolver is pointed
// at the test's DNS server.
const MAIL_DKIM = String.raw`
use strict; use warnings;
use Mail::DKIM::Verifier; use Net::DNS::Resolver; use JSON::PP; use MIME::Base64;
my ($host, $port) = $ARGV[0] =~ /^(.*):(\d+)$/;
Mail::DKIM::DNS::resolver(Net::DNS::Resolver->new(nameservers => [$host], port => $port, udp_timeout => 5, tcp_timeout => 5, retry => 1));
sub check {
  my $v = Mail::DKIM::Verifier->new;
  $v->PRINT(decode_base64($_[0]));
  $v->CLOSE;
  return [map {
    my $h = $_->headerlist // ""; $h =~ s/\s+//g;
    { result => $_->result // "", detail => ($_->result eq "pass" ? "" : ($_->result_detail // "")),
      domain => $_->domain // "", selector => $_->selector // "", algorithm => $_->algorithm // "",
      headers => [map { lc } grep { length } split /:/, $h] }
  } $v->signatures];
}
my $messages = decode_json(do { local $/; <STDIN> });
print encode_json([map { check($_) } @$messages]);
`;

async function run(argv: string[], messages: Buffer[]): Promise<VerifiedSignature[][]> {
  const input = Buffer.from(JSON.stringify(messages.map((m) => m.toString("base64"))));
  const proc = Bun.spawn(argv, { stdin: input, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`${argv[0]} exited ${code}: ${err.trim()}`);
  return JSON.parse(out) as VerifiedSignature[][];
}

export const dkimpy: Verifier = (messages, dnsServer) => run(["/usr/bin/python3", "-c", DKIMPY, dnsServer], messages);

export const mailDkim: Verifier = (messages, dnsServer) => run(["perl", "-e", MAIL_DKIM, dnsServer], messages);

/** Both verifiers, by the name reports use. */
export const VERIFIERS: Record<string, Verifier> = { "python3-dkim": dkimpy, "Mail::DKIM": mailDkim };
