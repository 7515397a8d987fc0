// Docs that are generated from the code must be current: docs/ops.md (the op coverage table)
// is rebuilt from the op registry and the fixture files and compared with the committed file.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { opsDoc } from "../scripts/gen_ops_doc.ts";

it("docs/ops.md is current (run: npx tsx scripts/gen_ops_doc.ts)", () => {
  const committed = readFileSync(join(import.meta.dirname, "..", "docs", "ops.md"), "utf8");
  expect(committed).toBe(opsDoc());
});

it("every registered op has a row in an area table", () => {
  expect(opsDoc()).not.toMatch(/\| — \|/);
});
