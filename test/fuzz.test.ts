// A fixed-seed slice of the fault-injection battery (scripts/fuzz.ts, `npm run fuzz`): every
// category runs a few cases in a child process, and none may crash, hang, accept bad input or
// give a wrong result. The harness itself is checked too: a Kiln error is told from a builtin
// one, and the reports count what the cases came to.
//
// eager-misuse (errors naming the user's file:line:col), cache-tamper (an authenticated cache)
// and the safetensors /dev/zero and BOM cases check fixes made on other branches; until those
// merge, their assertions here fail, by design: they state what the battery must find.

import { describe, expect, it } from "vitest";
import { ParseError, ProtoError } from "../ir/errors.ts";
import { OpError } from "../tensor/errors.ts";
import {
  CATEGORIES,
  type Category,
  type CategoryReport,
  formatReports,
  isKilnError,
  runFuzz,
} from "../scripts/fuzz.ts";

const SEED = 20261202;
const BUDGET: Record<Category, number> = {
  "hlo-text": 40,
  "hlo-proto": 40,
  safetensors: 12,
  "eager-misuse": 12,
  "cache-tamper": 8,
  programs: 40,
};

function expectClean(r: CategoryReport): void {
  expect(r.tried).toBe(BUDGET[r.category]);
  const bad = r.failures.map((f) => `#${f.index} ${f.outcome}: ${f.detail}`);
  expect(bad, formatReports([r], true)).toEqual([]);
  expect(r.counts.crashed + r.counts.hung + r.counts["accepted-wrong"] + r.counts.wrong).toBe(0);
}

describe("the fuzz battery, seed " + SEED, () => {
  it("names every category of the issue's battery", () => {
    expect([...CATEGORIES]).toEqual([
      "hlo-text",
      "hlo-proto",
      "safetensors",
      "eager-misuse",
      "cache-tamper",
      "programs",
    ]);
  });

  it("tells Kiln's error types from JavaScript's own", () => {
    expect(isKilnError(new ParseError(1, 1, "x"))).toBe(true);
    expect(isKilnError(new ProtoError("x"))).toBe(true);
    expect(isKilnError(new OpError("add", "x"))).toBe(true);
    expect(isKilnError(new TypeError("x"))).toBe(false);
    expect(isKilnError(new RangeError("Invalid typed array length"))).toBe(false);
    expect(isKilnError(new Error("x"))).toBe(false);
    expect(isKilnError("a string")).toBe(false);
  });

  for (const category of CATEGORIES) {
    // The programs slice runs the exact backends; native's C compiles are for `npm run fuzz`.
    const backends = category === "programs" ? ["interpreter", "js"] : undefined;
    const title =
      `${category}: ${BUDGET[category]} cases, none crashed, hung, accepted-wrong or wrong`;
    it(title, async () => {
      const [report] = await runFuzz({
        seed: SEED,
        budget: BUDGET[category],
        categories: [category],
        timeoutMs: 30_000,
        ...(backends ? { backends } : {}),
      });
      expectClean(report!);
      // Each category sees bad input get rejected (programs: valid ones run).
      if (category === "programs") expect(report!.counts.accepted).toBeGreaterThan(0);
      else expect(report!.counts.rejected).toBeGreaterThan(0);
    }, 240_000);
  }

  it("a case is a function of (category, seed, index): reruns agree", async () => {
    const once = await runFuzz({ seed: SEED, budget: 10, categories: ["hlo-text", "hlo-proto"] });
    const again = await runFuzz({ seed: SEED, budget: 10, categories: ["hlo-text", "hlo-proto"] });
    expect(again.map((r) => r.counts)).toEqual(once.map((r) => r.counts));
  }, 120_000);

  it("a hanging case is hung, one that kills Node crashed; the next still runs", async () => {
    const once = { budget: 2, categories: ["hlo-text"] as Category[] };
    const [hang] = await runFuzz({ ...once, timeoutMs: 2000, selfTest: "hang" });
    expect(hang!.tried).toBe(2);
    expect(hang!.failures.map((f) => f.outcome)).toEqual(["hung", "hung"]);
    const [abort] = await runFuzz({ ...once, selfTest: "abort" });
    expect(abort!.failures.map((f) => f.outcome)).toEqual(["crashed", "crashed"]);
    expect(abort!.failures[0]!.detail).toMatch(/the process died \(SIGABRT\)/);
  }, 240_000);
});
