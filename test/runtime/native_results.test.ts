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
