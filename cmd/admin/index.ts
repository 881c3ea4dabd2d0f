// admin: the operator's command line, talking to limiterd.
import { explain, runAdmin } from "../../internal/admin/cli";
import { limiterUrl, loadOrExit } from "../../internal/config/config";
import { limiterClients } from "../../internal/limiterclient/client";

const url = loadOrExit("admin", () => limiterUrl(process.env));
try {
  await runAdmin(process.argv.slice(2), limiterClients(url), { out: (line) => console.log(line) });
  process.exit(0);
} catch (err) {
  const { line, code } = explain(err, url);
  console.error(line);
  process.exit(code);
}
