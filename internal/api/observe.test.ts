// Metric route labels come from the route table: a bounded set, ids folded into templates.
import { expect, test } from "bun:test";
import { routeLabel } from "./observe";
import { ROUTES } from "./routes";

test("a path's label is its route's template; fixed paths are themselves; anything else is other", () => {
  expect(
    [
      "/api/v1/tags",
      "/api/v1/tags/Spring%20sale",
      "/api/v1/emails/msg_5f1d2c3b4a5968778695a4b3",
      "/api/v1/subscribers/batch",
      "/api/v1/subscribers/kim%40example.org",
      "/api/v1/subscribers/sub_0194a3b2c1d0e1f2a3b4c5d6/events",
      "/healthz",
      "/api/v1/subscribers/x/y/z",
      "/wp-login.php",
    ].map((p) => routeLabel(p, ROUTES)),
  ).toEqual([
    "/api/v1/tags",
    "/api/v1/tags/{name}",
    "/api/v1/emails/{id}",
    "/api/v1/subscribers/batch",
    "/api/v1/subscribers/{id}",
    "/api/v1/subscribers/{id}/events",
    "/healthz",
    "other",
    "other",
  ]);
});
