// The subscribers page's filters, refused as the API refuses them, and the lists' paging.
import { expect, test } from "bun:test";
import { MAX_EMAIL } from "../api/subscribers";
import { filterRefusal, paging } from "./audience";
import { pageRequest } from "./request";

test("a filter the API would refuse is said in the API's words; none is nothing", () => {
  expect(filterRefusal("", "")).toBeUndefined();
  expect(filterRefusal("kim@", "vip")).toBeUndefined();
  expect(filterRefusal("k".repeat(MAX_EMAIL + 1), "")).toContain(`(${MAX_EMAIL} characters)`);
  expect(filterRefusal("", "no/slashes")).toStartWith("tag: ");
  expect(filterRefusal("", "t".repeat(65))).toStartWith("tag: ");
});

test("a list's page: the API's default length, from the link's cursor", () => {
  const at = (path: string) =>
    paging(pageRequest(new Request(`http://mail.test${path}`), new URL(`http://mail.test${path}`), "192.0.2.1", []));
  expect(at("/console/campaigns")).toEqual({ limit: 20, cursor: "" });
  expect(at("/console/campaigns?cursor=c2")).toEqual({ limit: 20, cursor: "c2" });
});
