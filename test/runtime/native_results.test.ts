// The native backend's result buffers. A program writes every element of every result, so large
// results are allocated without clearing (runtime/native/backend.ts, uninitializedResult). The
// whole test suite runs with KILN_NATIVE_UNINIT_MIN=0 and KILN_NATIVE_POISON_RESULTS=1
// (vitest.config.ts): every native result buffer starts as 0xFF bytes (NaN in f32, -1 in the
// integer types), so a kernel that left an element unwritten fails the differential tests
// against the evaluator. The default allocation is checked here in a fresh process.

import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { evaluate } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { readTextFile } from "../../compiler/node_builtins.ts";
import { getBackend } from "../../runtime/index.ts";
import { nativeTesting } from "../../runtime/native/backend.ts";

const here = dirname(fileURLToPath(import.meta.url));

describe("native result buffers", () => {
  it("the suite runs native programs on poisoned result buffers", () => {
    expect(process.env["KILN_NATIVE_POISON_RESULTS"]).toBe("1");
    expect(process.env["KILN_NATIVE_UNINIT_MIN"]).toBe("0");
    for (const bytes of [4, 100, 4096, 200_000]) {
      const b = nativeTesting.resultBuffer(bytes);
      expect(b).toBeDefined();
      expect(b!.byteLength).toBe(bytes);
      expect(new Uint8Array(b!).every((v) => v === 0xff)).toBe(true);
    }
    // A result of every element type, tuples included, comes back fully written.
    const m = parseHlo(`HloModule kinds
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  p = f32[3,5] parameter(0)
  i = s32[3,5] convert(p)
  n = pred[3,5] compare(p, p), direction=GT
  z = f32[] constant(0)
  s = f32[5] reduce(p, z), dimensions={0}, to_apply=add
  ROOT t = (f32[3,5], s32[3,5], pred[3,5], f32[5]) tuple(p, i, n, s)
}`);
    const x = new Literal("f32", [3, 5], Float32Array.from({ length: 15 }, (_, k) => k - 7));
    const got = getBackend("native").compile(m).run([x]) as Literal[];
    const want = evaluate(m, [x]) as Literal[];
    got.forEach((g, k) => expect(Array.from(g.data as ArrayLike<number>)).toEqual(
      Array.from(want[k]!.data as ArrayLike<number>)));
  });

  it("results of 4 MiB and up ask for huge pages before the program writes them", () => {
    // Linux with transparent huge pages (any mode but a kernel built without them) takes the
    // advice for the 2 MiB-aligned interior of a fresh buffer; elsewhere it is 0, never an error.
    const thp = readTextFile("/sys/kernel/mm/transparent_hugepage/enabled");
    const fresh = (bytes: number) => Buffer.allocUnsafe(bytes).buffer as ArrayBuffer;
    const advised = nativeTesting.adviseHugePages(fresh(8 << 20));
    if (process.platform === "linux" && thp !== undefined) {
      expect(advised).toBeGreaterThanOrEqual(4 << 20);
      expect(advised % (2 << 20)).toBe(0);
    } else {
      expect(advised).toBe(0);
    }
    expect(nativeTesting.adviseHugePages(fresh(1 << 20))).toBe(0);
    expect(() => nativeTesting.adviseHugePages(42 as unknown as ArrayBuffer)).toThrow(
      /adviseHugePages: expected an ArrayBuffer/);
    // A result above the size goes through the advice and is still fully written.
    const b = nativeTesting.resultBuffer(5 << 20)!;
    expect(b.byteLength).toBe(5 << 20);
    expect(new Uint8Array(b).every((v) => v === 0xff)).toBe(true);
    const m = parseHlo(`HloModule big
ENTRY e {
  p = f32[1200,1100] parameter(0)
  c = f32[] constant(0.5)
  h = f32[1200,1100] broadcast(c), dimensions={}
  ROOT r = f32[1200,1100] multiply(p, h)
}`);
    const x = new Literal("f32", [1200, 1100],
      Float32Array.from({ length: 1200 * 1100 }, (_, k) => (k % 977) - 400));
    const got = getBackend("native").compile(m).run([x]) as Literal;
    const want = evaluate(m, [x]) as Literal;
    expect(Buffer.from((got.data as Float32Array).buffer).equals(
      Buffer.from((want.data as Float32Array).buffer))).toBe(true);
  });

  it("large results by default: correct, each in its own buffer, data() an independent copy", () => {
    const env = { ...process.env };
    delete env["KILN_NATIVE_POISON_RESULTS"];
    delete env["KILN_NATIVE_UNINIT_MIN"];
    const r = spawnSync(process.execPath,
      ["--import", "tsx", join(here, "fixtures", "native", "results_worker.ts")],
      { cwd: join(here, "..", ".."), env, encoding: "utf8", timeout: 240_000 });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as Record<string, boolean>;
    expect(out).toEqual({
      equal: true,
      ownBuffer: true,
      distinct: true,
      dataOwnBuffer: true,
      dataIsCopy: true,
      dataValues: true,
    });
  });
});
