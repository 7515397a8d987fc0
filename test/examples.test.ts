// The README's main job and the IR example run to completion and say what they promise: the
// demo's compiled tokens equal eager ones, the block it prints is one transformer block, its
// speed-up is warm against warm, and it writes its HTML view; the IR demo's round trips hold.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { tinyConfig } from "../models/gpt2.ts";

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
  // What is printed under the heading is ONE block, not the whole forward: a GPT-2 block has
  // two layer norms and six dots (qkv, scores, scores x values, attention projection, two MLP
  // layers), the whole forward has nLayer times that plus the final norm and the LM head.
  const block = out.slice(out.indexOf("== The fused IR of one transformer block"),
    out.indexOf("HTML view of the graph"));
  const entry = block.slice(block.lastIndexOf("\nENTRY "));
  const count = (text: string, re: RegExp) => text.match(re)?.length ?? 0;
  expect(count(block, / dot\(/g)).toBe(6); // in the entry and in the fusions it calls
  expect(count(entry, /calls=%fused_layer_norm/g)).toBe(2);
  expect(count(block, / gather\(/g)).toBe(0); // no embedding lookup: not the forward's start
  expect(block).toContain(
    `(6 dot ops in this block; the whole forward, ${tinyConfig.nLayer} blocks and the LM head, ` +
      `has ${6 * tinyConfig.nLayer + 1})`,
  );
  // The speed-up is warm eager against warm compiled, and says how it was measured.
  expect(out).toMatch(/eager, second run \(warm\) +\d+ ms/);
  expect(out).toMatch(/compiled, second run \(warm\) +\d+ ms {2}\([\d.]+x eager\)/);
  expect(out).toContain("timed once after one untimed run of the same generation; " +
    "warm eager against warm compiled");
  const html = /HTML view of the graph .*: (.+\.html)/.exec(out)?.[1];
  expect(html && existsSync(html)).toBe(true);
});

it("examples/ir-demo.ts: round trips hold", () => {
  const out = run("examples/ir-demo.ts");
  expect(out).toContain("text  -> module -> text identical: true");
  expect(out).toMatch(/proto \(\d+ bytes\) -> module -> text identical: true/);
  expect(out).toContain("same fingerprint after both round trips: true");
});
