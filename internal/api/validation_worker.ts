// The thread that validates POST /api/v1/emails bodies (address parsing, Markdown rendering)
// off the API's event loop; see validation.ts.
import { serveJobs } from "../workerpool/pool";
import { type Validated, validateSendRequest } from "./send_request";

serveJobs<unknown, Validated>(validateSendRequest);
