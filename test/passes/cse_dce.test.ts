// Golden tests of CSE and DCE in IR text: parse, run one pass, compare with the expected module
// (values named keep_* survive, dead_* go). Each case also checks that the rewritten module
// evaluates bit-identically to the input on random inputs with NaN, ±inf and -0.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expectLiteral,
  registerCustomCallTarget,
  unregisterCustomCallTarget,
} from "../../ir/evaluate.ts";
import { parseHlo } from "../../ir/parse.ts";
import { verifyModule } from "../../ir/verify.ts";
import { CSE } from "../../passes/cse.ts";
import { DCE } from "../../passes/dce.ts";
import type { Pass } from "../../passes/pass.ts";
import { compareModules, normalize, runPass } from "./support.ts";

interface Case {
  name: string;
  input: string;
  /** Undefined: the pass must leave the input unchanged. */
  expected?: string;
}

const entry = (body: string, extra = "") => `HloModule m\n${extra}\nENTRY main {\n${body}\n}\n`;

function check(pass: () => Pass, c: Case, seed: number): void {
  const { module, changed, out } = runPass(c.input, pass());
  verifyModule(module);
  expect(out).toBe(normalize(c.expected ?? c.input));
  expect(changed).toBe(c.expected !== undefined);
  expect(compareModules(parseHlo(c.input), module, seed, 6)).toBeNull();
}

const reducer = (name: string, op = "add") => `${name} {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] ${op}(a, b)
}`;

const CSE_CASES: Case[] = [
  {
    name: "identical instructions merge; users move to the first",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_e1 = f32[4] exponential(keep_x)
  dead_e2 = f32[4] exponential(keep_x)
  ROOT keep_add = f32[4] add(keep_e1, dead_e2)`),
    expected: entry(`
  keep_x = f32[4] parameter(0)
  keep_e1 = f32[4] exponential(keep_x)
  ROOT keep_add = f32[4] add(keep_e1, keep_e1)`),
  },
  {
    name: "merging cascades: users of merged values become identical too",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_n1 = f32[4] negate(keep_x)
  dead_n2 = f32[4] negate(keep_x)
  keep_a1 = f32[4] abs(keep_n1)
  dead_a2 = f32[4] abs(dead_n2)
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_a1, dead_a2)`),
    expected: entry(`
  keep_x = f32[4] parameter(0)
  keep_n1 = f32[4] negate(keep_x)
  keep_a1 = f32[4] abs(keep_n1)
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_a1, keep_a1)`),
  },
  {
    name: "add and multiply commute: add(a, b) and add(b, a) merge",
    input: entry(`
  keep_a = f32[4] parameter(0)
  keep_b = f32[4] parameter(1)
  keep_s1 = f32[4] add(keep_a, keep_b)
  dead_s2 = f32[4] add(keep_b, keep_a)
  keep_m1 = f32[4] multiply(keep_a, keep_b)
  dead_m2 = f32[4] multiply(keep_b, keep_a)
  ROOT keep_t = (f32[4], f32[4], f32[4], f32[4]) tuple(keep_s1, dead_s2, keep_m1, dead_m2)`),
    expected: entry(`
  keep_a = f32[4] parameter(0)
  keep_b = f32[4] parameter(1)
  keep_s1 = f32[4] add(keep_a, keep_b)
  keep_m1 = f32[4] multiply(keep_a, keep_b)
  ROOT keep_t = (f32[4], f32[4], f32[4], f32[4]) tuple(keep_s1, keep_s1, keep_m1, keep_m1)`),
  },
  {
    name: "maximum does not commute bit for bit (max(-0, +0) is the lhs): not merged",
    input: entry(`
  keep_a = f32[4] parameter(0)
  keep_b = f32[4] parameter(1)
  keep_m1 = f32[4] maximum(keep_a, keep_b)
  keep_m2 = f32[4] maximum(keep_b, keep_a)
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_m1, keep_m2)`),
  },
  {
    name: "subtract is not commutative: not merged",
    input: entry(`
  keep_a = s32[4] parameter(0)
  keep_b = s32[4] parameter(1)
  keep_s1 = s32[4] subtract(keep_a, keep_b)
  keep_s2 = s32[4] subtract(keep_b, keep_a)
  ROOT keep_t = (s32[4], s32[4]) tuple(keep_s1, keep_s2)`),
  },
  {
    name: "parameters are never merged",
    input: entry(`
  keep_a = f32[4] parameter(0)
  keep_b = f32[4] parameter(1)
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_a, keep_b)`),
  },
  {
    name: "identical constants merge; -0 and +0 do not",
    input: entry(`
  keep_c1 = f32[2] constant({1, -0})
  dead_c2 = f32[2] constant({1, -0})
  keep_c3 = f32[2] constant({1, 0})
  ROOT keep_t = (f32[2], f32[2], f32[2]) tuple(keep_c1, dead_c2, keep_c3)`),
    expected: entry(`
  keep_c1 = f32[2] constant({1, -0})
  keep_c3 = f32[2] constant({1, 0})
  ROOT keep_t = (f32[2], f32[2], f32[2]) tuple(keep_c1, keep_c1, keep_c3)`),
  },
  {
    name: "attributes and shapes are part of the key",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  keep_r1 = f32[2,3] reverse(keep_x), dimensions={0}
  keep_r2 = f32[2,3] reverse(keep_x), dimensions={1}
  keep_c1 = s32[2,3] convert(keep_x)
  keep_c2 = u8[2,3] convert(keep_x)
  ROOT keep_t = (f32[2,3], f32[2,3], s32[2,3], u8[2,3]) tuple(keep_r1, keep_r2, keep_c1, keep_c2)`),
  },
  {
    name: "custom-calls are never merged (they may have effects)",
    input: entry(`
  keep_x = f32[2] parameter(0)
  keep_c1 = f32[2] custom-call(keep_x), custom_call_target="kiln.test.id"
  keep_c2 = f32[2] custom-call(keep_x), custom_call_target="kiln.test.id"
  ROOT keep_t = (f32[2], f32[2]) tuple(keep_c1, keep_c2)`),
  },
  {
    name: "identical computations merge and callers point at the first",
    input: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  keep_r1 = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_sum
  dead_r2 = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=dead_sum
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_r1, dead_r2)`,
      `${reducer("keep_sum")}\n${reducer("dead_sum")}`,
    ),
    expected: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  keep_r1 = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_sum
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_r1, keep_r1)`,
      reducer("keep_sum"),
    ),
  },
  {
    name: "identical fusion bodies are not merged (fusion passes edit them per fusion)",
    input: entry(
      `
  keep_x = f32[4] parameter(0)
  keep_f1 = f32[4] fusion(keep_x), kind=kLoop, calls=keep_body1
  keep_f2 = f32[4] fusion(keep_x), kind=kLoop, calls=keep_body2
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_f1, keep_f2)`,
      `keep_body1 {
  p1 = f32[4] parameter(0)
  ROOT e1 = f32[4] exponential(p1)
}
keep_body2 {
  p2 = f32[4] parameter(0)
  ROOT e2 = f32[4] exponential(p2)
}`,
    ),
  },
  {
    name: "different reducers are not merged",
    input: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  keep_r1 = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_sum
  keep_r2 = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_max
  ROOT keep_t = (f32[4], f32[4]) tuple(keep_r1, keep_r2)`,
      `${reducer("keep_sum")}\n${reducer("keep_max", "maximum")}`,
    ),
  },
];

const DCE_CASES: Case[] = [
  {
    name: "instructions the ROOT does not use are removed; parameters stay",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_unused = f32[4] parameter(1)
  dead_e = f32[4] exponential(keep_x)
  dead_n = f32[4] negate(dead_e)
  dead_c = f32[] constant(3)
  ROOT keep_a = f32[4] abs(keep_x)`),
    expected: entry(`
  keep_x = f32[4] parameter(0)
  keep_unused = f32[4] parameter(1)
  ROOT keep_a = f32[4] abs(keep_x)`),
  },
  {
    name: "unused custom-calls stay, with what they use",
    input: entry(`
  keep_x = f32[2] parameter(0)
  keep_n = f32[2] negate(keep_x)
  keep_cc = f32[2] custom-call(keep_n), custom_call_target="kiln.test.id"
  dead_e = f32[2] exponential(keep_x)
  ROOT keep_a = f32[2] abs(keep_x)`),
    expected: entry(`
  keep_x = f32[2] parameter(0)
  keep_n = f32[2] negate(keep_x)
  keep_cc = f32[2] custom-call(keep_n), custom_call_target="kiln.test.id"
  ROOT keep_a = f32[2] abs(keep_x)`),
  },
  {
    name: "computations no longer called are removed, with what only they called",
    input: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  dead_r = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=dead_sum
  ROOT keep_n = f32[4,3] negate(keep_x)`,
      `${reducer("dead_inner")}
dead_sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] call(a, b), to_apply=dead_inner
}`,
    ),
    expected: entry(`
  keep_x = f32[4,3] parameter(0)
  ROOT keep_n = f32[4,3] negate(keep_x)`),
  },
  {
    name: "dead code inside called computations is removed too",
    input: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  ROOT keep_r = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_sum`,
      `keep_sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  dead_m = f32[] multiply(a, b)
  ROOT r = f32[] add(a, b)
}`,
    ),
    expected: entry(
      `
  keep_x = f32[4,3] parameter(0)
  keep_z = f32[] constant(0)
  ROOT keep_r = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=keep_sum`,
      reducer("keep_sum"),
    ),
  },
  {
    name: "a module without dead code is unchanged",
    input: entry(`
  keep_x = f32[4] parameter(0)
  ROOT keep_a = f32[4] abs(keep_x)`),
  },
];

describe("cse / dce golden cases", () => {
  beforeAll(() =>
    registerCustomCallTarget("kiln.test.id", ([x]) => expectLiteral(x!)),
  );
  afterAll(() => unregisterCustomCallTarget("kiln.test.id"));

  describe("cse", () => {
    CSE_CASES.forEach((c, k) => it(c.name, () => check(() => new CSE(), c, 300 + k)));

    it("leaves computations alone when dedupe is off", () => {
      const c = CSE_CASES.find((x) => x.name.startsWith("identical computations"))!;
      const { out } = runPass(c.input, new CSE({ dedupeComputations: false }));
      expect(out).toContain("dead_sum");
    });
  });

  describe("dce", () => {
    DCE_CASES.forEach((c, k) => it(c.name, () => check(() => new DCE(), c, 400 + k)));
  });
});
