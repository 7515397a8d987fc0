// The README's main job and the IR example run to completion and say what they promise: the
// demo's compiled tokens equal eager ones and it writes its HTML view; the IR demo's round
// trips hold.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const run = (file: string) =>
  execFileSync(process.execPath, ["--import", "tsx", join(ROOT, file)], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });

it("npm start (examples/demo.ts): compiled generation equals eager, reasons and HTML shown", () => {
  const out = run("examples/demo.ts");
  expect(out).toContain("compiled tokens equal eager: true");
  expect(out).toContain("== Compiles and recompiles ==");
  expect(out).toMatch(/calls \d+, compiles \d+/);
  expect(out).toContain("== The fused IR of one transformer block (h.0), traced at length 5 ==");
  expect(out).toMatch(/kInput/);
  const html = /HTML view of the graph .*: (.+\.html)/.exec(out)?.[1];
  expect(html && existsSync(html)).toBe(true);
});

it("examples/ir-demo.ts: round trips hold", () => {
  const out = run("examples/ir-demo.ts");
  expect(out).toContain("text  -> module -> text identical: true");
  expect(out).toMatch(/proto \(\d+ bytes\) -> module -> text identical: true/);
  expect(out).toContain("same fingerprint after both round trips: true");
});
