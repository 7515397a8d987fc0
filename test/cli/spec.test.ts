// Size-spec parsing (cli/spec.ts): single specs, ranges expanded in order, lists and files,
// and a one-line CliError with exit code 2 for each malformed input.

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CliError, EXIT } from "../../cli/errors.ts";
import { expandSpec, formatSpec, parseShapes, parseSpec } from "../../cli/spec.ts";

function usageError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CliError);
    expect((e as CliError).code).toBe(EXIT.usage);
    expect((e as CliError).message).not.toContain("\n");
    return (e as CliError).message;
  }
  throw new Error("expected a CliError");
}

describe("parseSpec", () => {
  it("reads name=value pairs in order", () => {
    const s = parseSpec("batch=2, seq=128");
    expect(s).toEqual({ batch: 2, seq: 128 });
    expect(Object.keys(s)).toEqual(["batch", "seq"]);
    expect(formatSpec(s)).toBe("batch=2,seq=128");
  });

  it("rejects malformed specs with the offending text", () => {
    expect(usageError(() => parseSpec("batch=x"))).toContain("'x' is not a positive integer");
    expect(usageError(() => parseSpec("batch=0"))).toContain("'0' is not a positive integer");
    expect(usageError(() => parseSpec("batch=-1"))).toContain("not a positive integer");
    expect(usageError(() => parseSpec("batch"))).toContain("'batch' is not name=value");
    expect(usageError(() => parseSpec("2b=1"))).toContain("'2b' is not a size name");
    expect(usageError(() => parseSpec("a=1,a=2"))).toContain("'a' is given twice");
    expect(usageError(() => parseSpec(""))).toContain("empty");
    expect(usageError(() => parseSpec("seq=1..4"))).toContain("use --shapes for ranges");
  });
});

describe("expandSpec and parseShapes", () => {
  it("expands a range to every size in order", () => {
    const specs = expandSpec("seq=1..5");
    expect(specs.map((s) => s["seq"])).toEqual([1, 2, 3, 4, 5]);
  });

  it("expands several ranges with the first key slowest", () => {
    expect(expandSpec("batch=1..2,seq=3..4")).toEqual([
      { batch: 1, seq: 3 },
      { batch: 1, seq: 4 },
      { batch: 2, seq: 3 },
      { batch: 2, seq: 4 },
    ]);
  });

  it("reads ;-separated lists and files with comments", () => {
    expect(parseShapes("seq=1;seq=4..5")).toEqual([{ seq: 1 }, { seq: 4 }, { seq: 5 }]);
    const dir = mkdtempSync(join(tmpdir(), "kiln-spec-"));
    const file = join(dir, "shapes.txt");
    writeFileSync(file, "# prompts\nbatch=1,seq=2\n\nbatch=2,seq=1..2  # decode\n");
    expect(parseShapes(file)).toEqual([
      { batch: 1, seq: 2 },
      { batch: 2, seq: 1 },
      { batch: 2, seq: 2 },
    ]);
    writeFileSync(file, "seq=1\nseq=oops\n");
    expect(usageError(() => parseShapes(file))).toMatch(/shapes\.txt:2: bad size spec 'seq=oops'/);
    writeFileSync(file, "# nothing\n");
    expect(usageError(() => parseShapes(file))).toContain("no size specs");
  });

  it("rejects empty and huge ranges", () => {
    expect(usageError(() => expandSpec("seq=5..1"))).toContain("the range 5..1 is empty");
    expect(usageError(() => expandSpec("a=1..1000,b=1..1000"))).toContain("expands to 1000000");
  });
});
