import { describe, expect, test } from "bun:test";
import { SessionSlots } from "./admission";

const limits = { perAddress: 2, waitingPerAddress: 2, perOrganization: 3 };

/** Slots whose address "a" holds its cap of unauthenticated sessions; admitted records the waiting ones greeted. */
function addressAtItsCap() {
  const slots = new SessionSlots(limits);
  const admitted: string[] = [];
  slots.arrive("a", () => {});
  slots.arrive("a", () => {});
  return { slots, admitted };
}

describe("SessionSlots", () => {
  test("an address holds its cap, then waits in a bounded room, then is refused; another address is not affected", () => {
    const slots = new SessionSlots(limits);
    // Each connection has its own admit callback.
    expect(["a", "a", "a", "a", "a"].map((ip) => slots.arrive(ip, () => {}))).toEqual([
      "admitted",
      "admitted",
      "waiting",
      "waiting",
      "refused",
    ]);
    expect(slots.arrive("b", () => {})).toBe("admitted");
  });

  test("a freed slot goes to the longest waiting connection of that address, which then holds it", () => {
    const { slots, admitted } = addressAtItsCap();
    slots.arrive("a", () => admitted.push("first"));
    slots.arrive("a", () => admitted.push("second"));
    slots.leaveAddress("a");
    expect(admitted).toEqual(["first"]);
    // The room has space again, the address's cap is still held.
    expect(slots.arrive("a", () => admitted.push("third"))).toBe("waiting");
    slots.leaveAddress("a");
    slots.leaveAddress("a");
    expect(admitted).toEqual(["first", "second", "third"]);
    slots.leaveAddress("a");
    slots.leaveAddress("a");
    expect(slots.arrive("a", () => {})).toBe("admitted");
  });

  test("a connection that stops waiting is not admitted later", () => {
    const { slots, admitted } = addressAtItsCap();
    const gone = () => admitted.push("gone");
    slots.arrive("a", gone);
    slots.arrive("a", () => admitted.push("kept"));
    slots.stopWaiting("a", gone);
    slots.leaveAddress("a");
    expect(admitted).toEqual(["kept"]);
  });

  test("authenticated sessions are bounded by their organization, not by their address", () => {
    const slots = new SessionSlots(limits);
    // Six sessions of one address authenticate one after the other: each frees its address slot.
    for (let i = 0; i < 3; i++) {
      expect(slots.arrive("a", () => {})).toBe("admitted");
      expect(slots.joinOrganization("acme")).toBe(true);
      slots.leaveAddress("a");
    }
    expect(slots.joinOrganization("acme")).toBe(false);
    expect(slots.joinOrganization("other")).toBe(true);
    slots.leaveOrganization("acme");
    expect(slots.joinOrganization("acme")).toBe(true);
  });
});
