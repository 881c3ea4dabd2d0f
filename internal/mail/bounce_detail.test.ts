// A classified refusal's event detail reads back as it was written; any other detail is none.
import { expect, test } from "bun:test";
import { bounceDetail, bounceOfDetail } from "./bounce_detail";

test("a bounce's detail reads back: type, status (or none) and the diagnostic as given", () => {
  for (const b of [
    {
      type: "hard",
      status: "5.1.1",
      diagnostic: "550 5.1.1 <kim@example.org>: Recipient address rejected: User unknown",
    },
    { type: "policy", status: "5.7.1", diagnostic: "554 5.7.1 Message refused: spam\nsecond line: 2.0.0" },
    { type: "soft", status: "", diagnostic: "" },
  ] as const) {
    expect(bounceOfDetail(bounceDetail(b))).toEqual(b);
  }
  expect(bounceDetail({ type: "hard", status: "5.1.1", diagnostic: "user unknown" })).toBe(
    "hard bounce 5.1.1: user unknown",
  );
  for (const other of ["550 5.1.1 user unknown", "delivered", "transient bounce 4.2.2: full", "hard bounce 5.1: x", ""])
    expect(bounceOfDetail(other)).toBeUndefined();
});
