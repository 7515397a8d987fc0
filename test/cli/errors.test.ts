// The `kiln` CLI's one-line errors from a model file end with the place in that file,
// `at file:line:col`: a syntax error (esbuild's position, through tsx, made 1-based), an error
// thrown while the file is imported, and an op's misuse inside the model's forward. Each run is
// a child process (`node cli/kiln.js`), as in cli.test.ts.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-cli-errors-cache-"));
const dir = mkdtempSync(join(tmpdir(), "kiln-cli-errors-"));
writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n');

/** Runs the CLI; a failure must be exactly one line on stderr with `code`. */
function oneLineError(code: number, ...args: string[]): string {
  const r = spawnSync(process.execPath, ["cli/kiln.js", ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(code);
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  return lines[0]!;
}

describe("kiln: errors in a model file name its line", () => {
  it("a syntax error: the message and file:line:col, not just 'Transform failed'", () => {
    const file = join(dir, "syntax.ts");
    writeFileSync(file, "export default function f(x: number) {\n  return x +;\n}\n");
    const line = oneLineError(3, "run", file);
    expect(line.startsWith(`kiln run: cannot import '${file}': `), line).toBe(true);
    expect(line).not.toContain("Transform failed");
    // `  return x +;`: the `;` is column 13 of line 2.
    expect(line).toMatch(/: Unexpected ";" at .*syntax\.ts:2:13$/);
    expect(line.endsWith(`at ${file}:2:13`), line).toBe(true);
  });

  it("an error thrown while the file is imported", () => {
    const file = join(dir, "top.ts");
    writeFileSync(file, 'export default (x: number) => x;\nthrow new Error("no weights");\n');
    const line = oneLineError(3, "explain", file);
    expect(line).toBe(`kiln explain: cannot import '${file}': no weights at ${file}:2:7`);
  });

  it("an op's misuse in the model's forward, under every command that runs it", () => {
    const fixture = "test/cli/fixtures/bad_matmul.ts";
    const text = readFileSync(join(root, fixture), "utf8").split("\n");
    const index = text.findIndex((l) => l.includes("// the offending call"));
    const at = `at ${fixture}:${index + 1}:${text[index]!.indexOf("matmul") + 1}`;
    for (const command of ["run", "explain", "dump"]) {
      const line = oneLineError(4, command, fixture);
      expect(line).toContain("matmul: shapes [2,3] and [5,2] cannot be multiplied");
      expect(line.endsWith(at), line).toBe(true);
    }
  });
});
