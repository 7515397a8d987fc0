// The build id in every cache key (runtime/build_id.ts): it changes when any library source
// changes — a pass, a renderer, the C runtime — and not for tests or files outside the library,
// so a checkout between releases never loads the programs another build of it wrote.

import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { sourceBuildId } from "../../runtime/build_id.ts";
import { KILN_VERSION } from "../../runtime/cache.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tree(): string {
  const d = mkdtempSync(join(tmpdir(), "kiln-build-id-"));
  dirs.push(d);
  mkdirSync(join(d, "passes"), { recursive: true });
  mkdirSync(join(d, "runtime/native/csrc/test"), { recursive: true });
  mkdirSync(join(d, "test"), { recursive: true });
  writeFileSync(join(d, "index.ts"), "export {};\n");
  writeFileSync(join(d, "passes/simplify.ts"), "export const rule = 1;\n");
  writeFileSync(join(d, "passes/simplify.test.ts"), "// a test\n");
  writeFileSync(join(d, "runtime/native/csrc/gemm.c"), "int gemm;\n");
  writeFileSync(join(d, "runtime/native/csrc/test/bench.c"), "int bench;\n");
  writeFileSync(join(d, "test/a.test.ts"), "// outside the library\n");
  writeFileSync(join(d, "README.md"), "readme\n");
  return d;
}

describe("the build id", () => {
  it("is the running Kiln's: the package version plus the hash of these sources", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    expect(KILN_VERSION).toBe(`${pkg.version}+${sourceBuildId(root)}`);
    expect(KILN_VERSION).toMatch(/^\d+\.\d+\.\d+\S*\+[0-9a-f]{16}$/);
  });

  it("changes with a library source or the C runtime, and only with them", () => {
    const d = tree();
    const base = sourceBuildId(d);
    expect(sourceBuildId(d)).toBe(base);

    // Not part of the library: tests, the C runtime's own tests, other files.
    writeFileSync(join(d, "passes/simplify.test.ts"), "// another test\n");
    writeFileSync(join(d, "runtime/native/csrc/test/bench.c"), "int bench2;\n");
    writeFileSync(join(d, "test/a.test.ts"), "// changed\n");
    writeFileSync(join(d, "README.md"), "changed\n");
    expect(sourceBuildId(d)).toBe(base);

    writeFileSync(join(d, "passes/simplify.ts"), "export const rule = 2;\n");
    const changedPass = sourceBuildId(d);
    expect(changedPass).not.toBe(base);

    writeFileSync(join(d, "runtime/native/csrc/gemm.c"), "int gemm2;\n");
    const changedC = sourceBuildId(d);
    expect(changedC).not.toBe(changedPass);

    // A new file, and a file moved to another name with the same bytes, are other builds too.
    writeFileSync(join(d, "passes/new_rule.ts"), "export {};\n");
    const added = sourceBuildId(d);
    expect(added).not.toBe(changedC);
    rmSync(join(d, "passes/new_rule.ts"));
    writeFileSync(join(d, "passes/renamed.ts"), "export {};\n");
    expect(sourceBuildId(d)).not.toBe(added);
  });
});
