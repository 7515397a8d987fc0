// Golden tests of the algebraic simplifier and constant folding, written in IR text: each case
// parses a small module, runs ONE pass and compares the printed result with the expected text.
// Inputs name values keep_* (must survive) and dead_* (must go), so the expected output
// explains itself. Every case is also run through the evaluator on random inputs rich in NaN,
// ±inf and -0: the rewritten module must give bit-identical results. Negative cases (rules that
// must NOT fire: x + (+0) and x * 0 on floats, f32 → f16 → f32, ...) expect the input
// unchanged.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expectLiteral,
  registerCustomCallTarget,
  unregisterCustomCallTarget,
} from "../../ir/evaluate.ts";
import { literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { verifyModule } from "../../ir/verify.ts";
import { ConstantFolding } from "../../passes/constant_fold.ts";
import type { Pass } from "../../passes/pass.ts";
import { AlgebraicSimplifier } from "../../passes/simplify.ts";
import { RULES } from "../../passes/simplify_rules.ts";
import { compareModules, normalize, runPass } from "./support.ts";

interface Case {
  /** What the case shows; the rule's name first. */
  name: string;
  input: string;
  /** The expected module; undefined when the pass must leave the input unchanged. */
  expected?: string;
}

/** A module whose ENTRY has `body` (parser shorthand: no `%`, operand shapes optional). */
const entry = (body: string, extra = "") => `HloModule m\n${extra}\nENTRY main {\n${body}\n}\n`;

function check(pass: () => Pass, c: Case, seed: number): void {
  const { module, changed, out } = runPass(c.input, pass());
  verifyModule(module);
  const want = normalize(c.expected ?? c.input);
  expect(out).toBe(want);
  expect(changed).toBe(c.expected !== undefined);
  expect(compareModules(parseHlo(c.input), module, seed, 6)).toBeNull();
}

const ADD_S32 = `add_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}`;
const ADD_F32 = `add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}`;
const MAX_F32 = `max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}`;

const SIMPLIFIER_CASES: Case[] = [
  // ---- arithmetic identities
  {
    name: "mul-one: x * broadcast(1) → x",
    input: entry(`
  keep_x = f32[4] parameter(0)
  dead_one = f32[] constant(1)
  dead_ones = f32[4] broadcast(dead_one), dimensions={}
  dead_mul = f32[4] multiply(keep_x, dead_ones)
  ROOT keep_neg = f32[4] negate(dead_mul)`),
    expected: entry(`
  keep_x = f32[4] parameter(0)
  ROOT keep_neg = f32[4] negate(keep_x)`),
  },
  {
    name: "mul-one: constant{1,1,1} * x → x (s32)",
    input: entry(`
  keep_x = s32[3] parameter(0)
  dead_ones = s32[3] constant({1, 1, 1})
  dead_mul = s32[3] multiply(dead_ones, keep_x)
  ROOT keep_neg = s32[3] negate(dead_mul)`),
    expected: entry(`
  keep_x = s32[3] parameter(0)
  ROOT keep_neg = s32[3] negate(keep_x)`),
  },
  {
    name: "mul-one does not fire on a non-splat constant",
    input: entry(`
  keep_x = f32[2] parameter(0)
  keep_c = f32[2] constant({1, 2})
  ROOT keep_mul = f32[2] multiply(keep_x, keep_c)`),
  },
  {
    name: "x * 0 is NOT folded for floats (NaN * 0 = NaN, -1 * 0 = -0)",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_zero = f32[] constant(0)
  keep_zeros = f32[4] broadcast(keep_zero), dimensions={}
  ROOT keep_mul = f32[4] multiply(keep_x, keep_zeros)`),
  },
  {
    name: "add-zero: x + (-0) → x for floats",
    input: entry(`
  keep_x = f32[4] parameter(0)
  dead_z = f32[] constant(-0)
  dead_zs = f32[4] broadcast(dead_z), dimensions={}
  dead_add = f32[4] add(dead_zs, keep_x)
  ROOT keep_abs = f32[4] abs(dead_add)`),
    expected: entry(`
  keep_x = f32[4] parameter(0)
  ROOT keep_abs = f32[4] abs(keep_x)`),
  },
  {
    name: "x + (+0) is NOT x for floats (-0 + +0 = +0)",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_z = f32[] constant(0)
  keep_zs = f32[4] broadcast(keep_z), dimensions={}
  ROOT keep_add = f32[4] add(keep_x, keep_zs)`),
  },
  {
    name: "add-zero: x + 0 → x for integers",
    input: entry(`
  keep_x = s32[4] parameter(0)
  dead_z = s32[] constant(0)
  dead_zs = s32[4] broadcast(dead_z), dimensions={}
  ROOT dead_add = s32[4] add(keep_x, dead_zs)`),
    expected: entry(`
  ROOT keep_x = s32[4] parameter(0)`),
  },
  {
    name: "sub-zero: x - (+0) → x for floats",
    input: entry(`
  keep_x = f32[3] parameter(0)
  dead_z = f32[3] constant({0, 0, 0})
  dead_sub = f32[3] subtract(keep_x, dead_z)
  ROOT keep_exp = f32[3] exponential(dead_sub)`),
    expected: entry(`
  keep_x = f32[3] parameter(0)
  ROOT keep_exp = f32[3] exponential(keep_x)`),
  },
  {
    name: "x - (-0) is NOT x (-0 - -0 = +0)",
    input: entry(`
  keep_x = f32[3] parameter(0)
  keep_z = f32[3] constant({-0, -0, -0})
  ROOT keep_sub = f32[3] subtract(keep_x, keep_z)`),
  },
  {
    name: "0 - x is not x",
    input: entry(`
  keep_x = s32[3] parameter(0)
  keep_z = s32[3] constant({0, 0, 0})
  ROOT keep_sub = s32[3] subtract(keep_z, keep_x)`),
  },
  {
    name: "div-one: x / 1 → x",
    input: entry(`
  keep_x = f16[2,2] parameter(0)
  dead_one = f16[] constant(1)
  dead_ones = f16[2,2] broadcast(dead_one), dimensions={}
  ROOT dead_div = f16[2,2] divide(keep_x, dead_ones)`),
    expected: entry(`
  ROOT keep_x = f16[2,2] parameter(0)`),
  },
  {
    name: "1 / x is not x",
    input: entry(`
  keep_x = f32[2] parameter(0)
  keep_one = f32[2] constant({1, 1})
  ROOT keep_div = f32[2] divide(keep_one, keep_x)`),
  },
  {
    name: "and-all-ones, or-zero, xor-zero on pred and integers",
    input: entry(`
  keep_p = pred[2] parameter(0)
  keep_x = u8[2] parameter(1)
  dead_t = pred[2] constant({1, 1})
  dead_and = pred[2] and(keep_p, dead_t)
  dead_ff = u8[2] constant({255, 255})
  dead_and2 = u8[2] and(dead_ff, keep_x)
  dead_z = u8[2] constant({0, 0})
  dead_or = u8[2] or(dead_and2, dead_z)
  dead_xor = u8[2] xor(dead_or, dead_z)
  ROOT keep_t = (pred[2], u8[2]) tuple(dead_and, dead_xor)`),
    expected: entry(`
  keep_p = pred[2] parameter(0)
  keep_x = u8[2] parameter(1)
  ROOT keep_t = (pred[2], u8[2]) tuple(keep_p, keep_x)`),
  },
  {
    name: "negate-negate: -(-x) → x (s32 wraps both times)",
    input: entry(`
  keep_x = s32[4] parameter(0)
  dead_n1 = s32[4] negate(keep_x)
  dead_n2 = s32[4] negate(dead_n1)
  ROOT keep_abs = s32[4] abs(dead_n2)`),
    expected: entry(`
  keep_x = s32[4] parameter(0)
  ROOT keep_abs = s32[4] abs(keep_x)`),
  },
  {
    name: "not-not on pred",
    input: entry(`
  keep_p = pred[3] parameter(0)
  dead_n1 = pred[3] not(keep_p)
  ROOT dead_n2 = pred[3] not(dead_n1)`),
    expected: entry(`
  ROOT keep_p = pred[3] parameter(0)`),
  },
  // ---- copies and conversions
  {
    name: "identity-copy and identity-convert",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  dead_copy = f32[2,3] copy(keep_x)
  dead_cvt = f32[2,3] convert(dead_copy)
  ROOT keep_neg = f32[2,3] negate(dead_cvt)`),
    expected: entry(`
  keep_x = f32[2,3] parameter(0)
  ROOT keep_neg = f32[2,3] negate(keep_x)`),
  },
  {
    name: "convert-convert: s32 → s64 → f32 is s32 → f32",
    input: entry(`
  keep_x = s32[4] parameter(0)
  dead_wide = s64[4] convert(keep_x)
  ROOT dead_f = f32[4] convert(dead_wide)`),
    expected: entry(`
  keep_x = s32[4] parameter(0)
  ROOT convert.1 = f32[4] convert(keep_x)`),
  },
  {
    name: "convert-convert: u8 → s32 → u8 is x",
    input: entry(`
  keep_x = u8[4] parameter(0)
  dead_wide = s32[4] convert(keep_x)
  dead_back = u8[4] convert(dead_wide)
  ROOT keep_neg = u8[4] negate(dead_back)`),
    expected: entry(`
  keep_x = u8[4] parameter(0)
  ROOT keep_neg = u8[4] negate(keep_x)`),
  },
  {
    name: "convert-convert: f16 → f32 → bf16 is f16 → bf16",
    input: entry(`
  keep_x = f16[4] parameter(0)
  dead_f = f32[4] convert(keep_x)
  ROOT dead_b = bf16[4] convert(dead_f)`),
    expected: entry(`
  keep_x = f16[4] parameter(0)
  ROOT convert.1 = bf16[4] convert(keep_x)`),
  },
  {
    name: "f32 → f16 → f32 is NOT folded (rounds)",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_h = f16[4] convert(keep_x)
  ROOT keep_f = f32[4] convert(keep_h)`),
  },
  {
    name: "s32 → f32 → s32 is NOT folded (f32 holds 24 bits)",
    input: entry(`
  keep_x = s32[4] parameter(0)
  keep_f = f32[4] convert(keep_x)
  ROOT keep_i = s32[4] convert(keep_f)`),
  },
  {
    name: "f32 → s32 → f32 is NOT folded (truncates)",
    input: entry(`
  keep_x = f32[4] parameter(0)
  keep_i = s32[4] convert(keep_x)
  ROOT keep_f = f32[4] convert(keep_i)`),
  },
  // ---- movement
  {
    name: "transpose-transpose: two transposes compose into one",
    input: entry(`
  keep_x = f32[2,3,4] parameter(0)
  dead_t1 = f32[3,4,2] transpose(keep_x), dimensions={1,2,0}
  ROOT dead_t2 = f32[4,3,2] transpose(dead_t1), dimensions={1,0,2}`),
    expected: entry(`
  keep_x = f32[2,3,4] parameter(0)
  ROOT transpose.1 = f32[4,3,2] transpose(keep_x), dimensions={2,1,0}`),
  },
  {
    name: "transpose-transpose: inverse permutations cancel; identity-transpose",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  dead_t1 = f32[3,2] transpose(keep_x), dimensions={1,0}
  dead_t2 = f32[2,3] transpose(dead_t1), dimensions={1,0}
  dead_t3 = f32[2,3] transpose(dead_t2), dimensions={0,1}
  ROOT keep_neg = f32[2,3] negate(dead_t3)`),
    expected: entry(`
  keep_x = f32[2,3] parameter(0)
  ROOT keep_neg = f32[2,3] negate(keep_x)`),
  },
  {
    name: "reshape-reshape and identity-reshape",
    input: entry(`
  keep_x = f32[2,6] parameter(0)
  dead_r1 = f32[3,4] reshape(keep_x)
  dead_r2 = f32[12] reshape(dead_r1)
  dead_r3 = f32[2,6] reshape(keep_x)
  ROOT keep_t = (f32[12], f32[2,6]) tuple(dead_r2, dead_r3)`),
    expected: entry(`
  keep_x = f32[2,6] parameter(0)
  reshape.1 = f32[12] reshape(keep_x)
  ROOT keep_t = (f32[12], f32[2,6]) tuple(reshape.1, keep_x)`),
  },
  {
    name: "reshape-reshape back to the original shape is x",
    input: entry(`
  keep_x = s32[2,3] parameter(0)
  dead_r1 = s32[6] reshape(keep_x)
  ROOT dead_r2 = s32[2,3] reshape(dead_r1)`),
    expected: entry(`
  ROOT keep_x = s32[2,3] parameter(0)`),
  },
  {
    name: "broadcast-broadcast composes the dimension maps; identity-broadcast",
    input: entry(`
  keep_x = f32[3] parameter(0)
  dead_b1 = f32[2,3] broadcast(keep_x), dimensions={1}
  dead_b2 = f32[2,4,3] broadcast(dead_b1), dimensions={0,2}
  dead_b3 = f32[3] broadcast(keep_x), dimensions={0}
  ROOT keep_t = (f32[2,4,3], f32[3]) tuple(dead_b2, dead_b3)`),
    expected: entry(`
  keep_x = f32[3] parameter(0)
  broadcast.1 = f32[2,4,3] broadcast(keep_x), dimensions={2}
  ROOT keep_t = (f32[2,4,3], f32[3]) tuple(broadcast.1, keep_x)`),
  },
  {
    name: "broadcast of a scalar constant is kept as is",
    input: entry(`
  keep_c = f32[] constant(2)
  ROOT keep_b = f32[1024,8] broadcast(keep_c), dimensions={}`),
  },
  {
    name: "slice-slice: starts add, strides multiply",
    input: entry(`
  keep_x = f32[20,4] parameter(0)
  dead_s1 = f32[9,4] slice(keep_x), slice={[2:20:2], [0:4]}
  ROOT dead_s2 = f32[3,2] slice(dead_s1), slice={[1:8:3], [1:3]}`),
    expected: entry(`
  keep_x = f32[20,4] parameter(0)
  ROOT slice.1 = f32[3,2] slice(keep_x), slice={[4:17:6], [1:3:1]}`),
  },
  {
    name: "slice-slice of an empty slice; identity-slice",
    input: entry(`
  keep_x = f32[10] parameter(0)
  dead_s1 = f32[4] slice(keep_x), slice={[0:10:3]}
  dead_s2 = f32[0] slice(dead_s1), slice={[4:4]}
  dead_s3 = f32[10] slice(keep_x), slice={[0:10]}
  ROOT keep_t = (f32[0], f32[10]) tuple(dead_s2, dead_s3)`),
    expected: entry(`
  keep_x = f32[10] parameter(0)
  slice.1 = f32[0] slice(keep_x), slice={[0:0:1]}
  ROOT keep_t = (f32[0], f32[10]) tuple(slice.1, keep_x)`),
  },
  {
    name: "identity-slice keeps a full slice of a dynamic dim (it is the identity)",
    input: entry(`
  keep_x = f32[<=8,2] parameter(0)
  dead_s = f32[<=8,2] slice(keep_x), slice={[0:8], [0:2]}
  ROOT keep_neg = f32[<=8,2] negate(dead_s)`),
    expected: entry(`
  keep_x = f32[<=8,2] parameter(0)
  ROOT keep_neg = f32[<=8,2] negate(keep_x)`),
  },
  {
    name: "reverse-reverse and identity-reverse over a size-1 dim",
    input: entry(`
  keep_x = f32[1,3] parameter(0)
  dead_r1 = f32[1,3] reverse(keep_x), dimensions={1,0}
  dead_r2 = f32[1,3] reverse(dead_r1), dimensions={0,1}
  dead_r3 = f32[1,3] reverse(dead_r2), dimensions={0}
  ROOT keep_neg = f32[1,3] negate(dead_r3)`),
    expected: entry(`
  keep_x = f32[1,3] parameter(0)
  ROOT keep_neg = f32[1,3] negate(keep_x)`),
  },
  {
    name: "identity-pad: pad with no padding → x",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  dead_z = f32[] constant(7)
  ROOT dead_pad = f32[2,3] pad(keep_x, dead_z), padding=0_0x0_0`),
    expected: entry(`
  ROOT keep_x = f32[2,3] parameter(0)`),
  },
  {
    name: "a pad that pads is kept",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  keep_z = f32[] constant(0)
  ROOT keep_pad = f32[3,3] pad(keep_x, keep_z), padding=1_0x0_0`),
  },
  {
    name: "concatenate-one: concatenate of one operand → the operand",
    input: entry(`
  keep_x = f32[2,3] parameter(0)
  ROOT dead_cat = f32[2,3] concatenate(keep_x), dimensions={1}`),
    expected: entry(`
  ROOT keep_x = f32[2,3] parameter(0)`),
  },
  // ---- select, tuples, dimension sizes
  {
    name: "select-constant: a splat true/false predicate picks one side",
    input: entry(`
  keep_a = f32[3] parameter(0)
  keep_b = f32[3] parameter(1)
  dead_t = pred[] constant(true)
  dead_ts = pred[3] broadcast(dead_t), dimensions={}
  dead_s1 = f32[3] select(dead_ts, keep_a, keep_b)
  dead_f = pred[3] constant({0, 0, 0})
  dead_s2 = f32[3] select(dead_f, keep_a, keep_b)
  ROOT keep_t = (f32[3], f32[3]) tuple(dead_s1, dead_s2)`),
    expected: entry(`
  keep_a = f32[3] parameter(0)
  keep_b = f32[3] parameter(1)
  ROOT keep_t = (f32[3], f32[3]) tuple(keep_a, keep_b)`),
  },
  {
    name: "select-same: select(p, a, a) → a",
    input: entry(`
  keep_p = pred[3] parameter(0)
  keep_a = f32[3] parameter(1)
  ROOT dead_s = f32[3] select(keep_p, keep_a, keep_a)`),
    expected: entry(`
  keep_p = pred[3] parameter(0)
  ROOT keep_a = f32[3] parameter(1)`),
  },
  {
    name: "select with a mixed constant predicate is kept",
    input: entry(`
  keep_a = f32[2] parameter(0)
  keep_b = f32[2] parameter(1)
  keep_p = pred[2] constant({1, 0})
  ROOT keep_s = f32[2] select(keep_p, keep_a, keep_b)`),
  },
  {
    name: "tuple-element: get-tuple-element(tuple(a, b), 1) → b",
    input: entry(`
  keep_a = f32[3] parameter(0)
  keep_b = s32[] parameter(1)
  dead_t = (f32[3], s32[]) tuple(keep_a, keep_b)
  ROOT dead_g = s32[] get-tuple-element(dead_t), index=1`),
    expected: entry(`
  keep_a = f32[3] parameter(0)
  ROOT keep_b = s32[] parameter(1)`),
  },
  {
    name: "static-dimension-size: the size of a static dim is a constant",
    input: entry(`
  keep_x = f32[<=8,5] parameter(0)
  keep_d0 = s32[] get-dimension-size(keep_x), dimensions={0}
  dead_d1 = s32[] get-dimension-size(keep_x), dimensions={1}
  ROOT keep_t = (s32[], s32[]) tuple(keep_d0, dead_d1)`),
    expected: entry(`
  keep_x = f32[<=8,5] parameter(0)
  keep_d0 = s32[] get-dimension-size(keep_x), dimensions={0}
  constant.1 = s32[] constant(5)
  ROOT keep_t = (s32[], s32[]) tuple(keep_d0, constant.1)`),
  },
  // ---- dot
  {
    name: "dot-transpose: the lhs transpose folds into the contracting dims",
    input: entry(`
  keep_a = f32[3,2] parameter(0)
  keep_b = f32[3,4] parameter(1)
  dead_at = f32[2,3] transpose(keep_a), dimensions={1,0}
  ROOT dead_dot = f32[2,4] dot(dead_at, keep_b),
    lhs_contracting_dims={1}, rhs_contracting_dims={0}`),
    expected: entry(`
  keep_a = f32[3,2] parameter(0)
  keep_b = f32[3,4] parameter(1)
  ROOT dot.1 = f32[2,4] dot(keep_a, keep_b),
    lhs_contracting_dims={0}, rhs_contracting_dims={0}`),
  },
  {
    name: "dot-transpose: batch dims map through the permutation",
    input: entry(`
  keep_a = f32[2,5,3] parameter(0)
  keep_b = f32[3,2,4] parameter(1)
  dead_at = f32[5,2,3] transpose(keep_a), dimensions={1,0,2}
  dead_bt = f32[2,3,4] transpose(keep_b), dimensions={1,0,2}
  ROOT dead_dot = f32[2,5,4] dot(dead_at, dead_bt),
    lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}`),
    expected: entry(`
  keep_a = f32[2,5,3] parameter(0)
  keep_b = f32[3,2,4] parameter(1)
  ROOT dot.1 = f32[2,5,4] dot(keep_a, keep_b),
    lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={0}`),
  },
  {
    name: "dot-transpose does NOT fire when the free dims would change order",
    input: entry(`
  keep_a = f32[2,4] parameter(0)
  keep_b = f32[3,5,2] parameter(1)
  keep_bt = f32[5,3,2] transpose(keep_b), dimensions={1,0,2}
  ROOT keep_dot = f32[4,5,3] dot(keep_a, keep_bt),
    lhs_contracting_dims={0}, rhs_contracting_dims={2}`),
  },
  {
    name: "transpose-dot: a transposed product is the product of the swapped operands",
    input: entry(`
  keep_a = f32[3,2] parameter(0)
  keep_b = f32[3,4] parameter(1)
  dead_dot = f32[2,4] dot(keep_a, keep_b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT dead_t = f32[4,2] transpose(dead_dot), dimensions={1,0}`),
    expected: entry(`
  keep_a = f32[3,2] parameter(0)
  keep_b = f32[3,4] parameter(1)
  ROOT dot.1 = f32[4,2] dot(keep_b, keep_a),
    lhs_contracting_dims={0}, rhs_contracting_dims={0}`),
  },
  {
    name: "transpose-dot: batch dims stay first, the free blocks swap",
    input: entry(`
  keep_a = f32[2,5,3] parameter(0)
  keep_b = f32[2,3,4,6] parameter(1)
  dead_dot = f32[2,5,4,6] dot(keep_a, keep_b),
    lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT dead_t = f32[2,4,6,5] transpose(dead_dot), dimensions={0,2,3,1}`),
    expected: entry(`
  keep_a = f32[2,5,3] parameter(0)
  keep_b = f32[2,3,4,6] parameter(1)
  ROOT dot.1 = f32[2,4,6,5] dot(keep_b, keep_a),
    lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}`),
  },
  {
    name: "transpose-dot does NOT fire when the dot has another user",
    input: entry(`
  keep_a = f32[3,2] parameter(0)
  keep_b = f32[3,4] parameter(1)
  keep_dot = f32[2,4] dot(keep_a, keep_b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  keep_t = f32[4,2] transpose(keep_dot), dimensions={1,0}
  ROOT keep_r = (f32[2,4], f32[4,2]) tuple(keep_dot, keep_t)`),
  },
  {
    name: "transpose-dot does NOT fire when the transpose reorders inside a free block",
    input: entry(`
  keep_a = f32[3,2,5] parameter(0)
  keep_b = f32[3,4] parameter(1)
  keep_dot = f32[2,5,4] dot(keep_a, keep_b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT keep_t = f32[4,5,2] transpose(keep_dot), dimensions={2,1,0}`),
  },
  // ---- reduce
  {
    name: "reduce-one: an s32 sum over a size-1 dim is a reshape",
    input: entry(
      `
  keep_x = s32[4,1,3] parameter(0)
  dead_z = s32[] constant(0)
  ROOT dead_r = s32[4,3] reduce(keep_x, dead_z), dimensions={1}, to_apply=add_s32`,
      ADD_S32,
    ),
    expected: entry(`
  keep_x = s32[4,1,3] parameter(0)
  ROOT reshape.1 = s32[4,3] reshape(keep_x)`, ADD_S32),
  },
  {
    name: "reduce-one: an f32 max with init -inf over a size-1 dim is a reshape",
    input: entry(
      `
  keep_x = f32[1,3] parameter(0)
  dead_init = f32[] constant(-inf)
  ROOT dead_r = f32[3] reduce(keep_x, dead_init), dimensions={0}, to_apply=max_f32`,
      MAX_F32,
    ),
    expected: entry(`
  keep_x = f32[1,3] parameter(0)
  ROOT reshape.1 = f32[3] reshape(keep_x)`, MAX_F32),
  },
  {
    name: "an f32 sum with init +0 over a size-1 dim is NOT a reshape (-0 + +0 = +0)",
    input: entry(
      `
  keep_x = f32[4,1] parameter(0)
  keep_z = f32[] constant(0)
  ROOT keep_r = f32[4] reduce(keep_x, keep_z), dimensions={1}, to_apply=add_f32`,
      ADD_F32,
    ),
  },
  {
    name: "reduce-empty: reducing a size-0 dim gives the init",
    input: entry(
      `
  keep_x = f32[0,3] parameter(0)
  keep_init = f32[] constant(5)
  ROOT dead_r = f32[3] reduce(keep_x, keep_init), dimensions={0}, to_apply=add_f32`,
      ADD_F32,
    ),
    expected: entry(`
  keep_x = f32[0,3] parameter(0)
  keep_init = f32[] constant(5)
  ROOT broadcast.1 = f32[3] broadcast(keep_init), dimensions={}`, ADD_F32),
  },
];

const FOLDING_CASES: Case[] = [
  {
    name: "folds scalar arithmetic on constants",
    input: entry(`
  dead_a = f32[] constant(2)
  dead_b = f32[] constant(3.5)
  ROOT dead_sum = f32[] add(dead_a, dead_b)`),
    expected: entry(`
  ROOT constant.1 = f32[] constant(5.5)`),
  },
  {
    name: "folds a small array op and keeps non-constant users",
    input: entry(`
  keep_x = s32[3] parameter(0)
  dead_a = s32[3] constant({1, 2, 3})
  dead_b = s32[3] constant({10, 20, 30})
  dead_m = s32[3] multiply(dead_a, dead_b)
  ROOT keep_add = s32[3] add(keep_x, dead_m)`),
    expected: entry(`
  keep_x = s32[3] parameter(0)
  constant.1 = s32[3] constant({10, 40, 90})
  ROOT keep_add = s32[3] add(keep_x, constant.1)`),
  },
  {
    name: "folds a reduce of a constant through its reducer",
    input: entry(
      `
  dead_x = f32[2,2] constant({{1, 2}, {3, 4}})
  dead_z = f32[] constant(0)
  ROOT dead_r = f32[2] reduce(dead_x, dead_z), dimensions={1}, to_apply=add_f32`,
      ADD_F32,
    ),
    expected: entry(`
  ROOT constant.1 = f32[2] constant({3, 7})`, ADD_F32),
  },
  {
    name: "folds special values exactly: -0 * 1, NaN + 1, 1 / 0",
    input: entry(`
  dead_a = f32[3] constant({-0, nan, 1})
  dead_b = f32[3] constant({1, 1, 0})
  ROOT dead_r = f32[3] divide(dead_a, dead_b)`),
    expected: entry(`
  ROOT constant.1 = f32[3] constant({-0, nan, inf})`),
  },
  {
    name: "elementwise op of big splats folds to a broadcast of a scalar",
    input: entry(`
  dead_a = f32[] constant(2)
  dead_ab = f32[2048] broadcast(dead_a), dimensions={}
  ROOT dead_neg = f32[2048] negate(dead_ab)`),
    expected: entry(`
  constant.1 = f32[] constant(-2)
  ROOT broadcast.1 = f32[2048] broadcast(constant.1), dimensions={}`),
  },
  {
    name: "compare of splats folds to a broadcast pred",
    input: entry(`
  dead_a = s32[] constant(3)
  dead_ab = s32[4,4] broadcast(dead_a), dimensions={}
  dead_b = s32[4,4] constant({{5,5,5,5},{5,5,5,5},{5,5,5,5},{5,5,5,5}})
  ROOT dead_lt = pred[4,4] compare(dead_ab, dead_b), direction=LT`),
    expected: entry(`
  constant.1 = pred[] constant(true)
  ROOT broadcast.1 = pred[4,4] broadcast(constant.1), dimensions={}`),
  },
  {
    name: "a same-width bitcast of a splat folds; a narrowing one folds as a small constant",
    input: entry(`
  dead_a = f32[] constant(1)
  dead_ab = f32[2048] broadcast(dead_a), dimensions={}
  dead_bits = s32[2048] bitcast-convert(dead_ab)
  dead_s = s32[2] constant({65537, 65537})
  dead_halves = f16[2,2] bitcast-convert(dead_s)
  ROOT keep_t = (s32[2048], f16[2,2]) tuple(dead_bits, dead_halves)`),
    expected: entry(`
  constant.1 = s32[] constant(1065353216)
  broadcast.1 = s32[2048] broadcast(constant.1), dimensions={}
  constant.2 = f16[2,2] constant({{5.96046448e-08, 5.96046448e-08},
    {5.96046448e-08, 5.96046448e-08}})
  ROOT keep_t = (s32[2048], f16[2,2]) tuple(broadcast.1, constant.2)`),
  },
  {
    name: "a big non-splat result is not materialized",
    input: entry(`
  keep_i = s32[2048] iota(), iota_dimension=0
  keep_c = s32[] constant(1)
  keep_cb = s32[2048] broadcast(keep_c), dimensions={}
  ROOT keep_add = s32[2048] add(keep_i, keep_cb)`),
  },
  {
    name: "broadcast and iota themselves are never folded",
    input: entry(`
  keep_c = f32[] constant(1)
  keep_b = f32[4] broadcast(keep_c), dimensions={}
  keep_i = s32[4] iota(), iota_dimension=0
  ROOT keep_t = (f32[4], s32[4]) tuple(keep_b, keep_i)`),
  },
  {
    name: "a small op of an iota and a broadcast constant folds",
    input: entry(`
  dead_i = s32[4] iota(), iota_dimension=0
  dead_c = s32[] constant(2)
  dead_cb = s32[4] broadcast(dead_c), dimensions={}
  ROOT dead_m = s32[4] multiply(dead_i, dead_cb)`),
    expected: entry(`
  ROOT constant.1 = s32[4] constant({0, 2, 4, 6})`),
  },
  {
    name: "custom-calls are never folded",
    input: entry(`
  keep_c = f32[2] constant({1, 2})
  ROOT keep_cc = f32[2] custom-call(keep_c), custom_call_target="kiln.test.double"`),
  },
  {
    name: "while loops, and calls of computations holding one, are never run to fold them",
    input: entry(
      `
  keep_c = s32[] constant(0)
  keep_w = s32[] while(keep_c), condition=cond, body=body
  keep_call = s32[] call(keep_c), to_apply=loop_fn
  ROOT keep_t = (s32[], s32[]) tuple(keep_w, keep_call)`,
      `cond {
  c_s = s32[] parameter(0)
  c_lim = s32[] constant(3)
  ROOT c_lt = pred[] compare(c_s, c_lim), direction=LT
}
body {
  b_s = s32[] parameter(0)
  b_one = s32[] constant(1)
  ROOT b_next = s32[] add(b_s, b_one)
}
loop_fn {
  f_a = s32[] parameter(0)
  ROOT f_w = s32[] while(f_a), condition=cond, body=body
}`,
    ),
  },
  {
    name: "a call of a loop-free computation on constants folds",
    input: entry(
      `
  dead_c = s32[] constant(4)
  ROOT dead_call = s32[] call(dead_c), to_apply=twice`,
      `twice {
  t_a = s32[] parameter(0)
  ROOT t_r = s32[] add(t_a, t_a)
}`,
    ),
    expected: entry(
      `
  ROOT constant.1 = s32[] constant(8)`,
      `twice {
  t_a = s32[] parameter(0)
  ROOT t_r = s32[] add(t_a, t_a)
}`,
    ),
  },
  {
    name: "replica-id, partition-id and collectives are never folded (they depend on the device)",
    input: entry(
      `
  keep_r = u32[] replica-id()
  keep_p = u32[] partition-id()
  keep_s = u32[] add(keep_r, keep_p)
  keep_c = f32[2] constant({1, 2})
  keep_ar = f32[2] all-reduce(keep_c), to_apply=sum
  ROOT keep_t = (u32[], f32[2]) tuple(keep_s, keep_ar)`,
      `sum {
  s_a = f32[] parameter(0)
  s_b = f32[] parameter(1)
  ROOT s_r = f32[] add(s_a, s_b)
}`,
    ),
  },
  {
    name: "an op with a parameter operand is not folded",
    input: entry(`
  keep_x = f32[2] parameter(0)
  keep_c = f32[2] constant({1, 2})
  ROOT keep_add = f32[2] add(keep_x, keep_c)`),
  },
];

describe("algebraic-simplifier golden cases", () => {
  SIMPLIFIER_CASES.forEach((c, k) => {
    it(c.name, () => check(() => new AlgebraicSimplifier(), c, 100 + k));
  });
});

describe("constant-folding golden cases", () => {
  // A custom-call target for the evaluator, so the case with one can be run.
  beforeAll(() =>
    registerCustomCallTarget("kiln.test.double", ([x]) => {
      const v = expectLiteral(x!);
      return literal(v.type, v.dims, v.toNumbers().map((n) => 2 * n));
    }),
  );
  afterAll(() => unregisterCustomCallTarget("kiln.test.double"));

  FOLDING_CASES.forEach((c, k) => {
    it(c.name, () => check(() => new ConstantFolding(), c, 200 + k));
  });
});

describe("rule table", () => {
  it("every rule has a unique kebab-case name and is exercised by a golden case", () => {
    const names = RULES.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) {
      expect(n).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
      const cases = SIMPLIFIER_CASES.filter((c) => c.expected !== undefined);
      expect(cases.some((c) => c.name.startsWith(n) || c.name.includes(` ${n}`))).toBe(true);
    }
  });

  it("counts the rules that fired and can leave rules out by name", () => {
    const text = entry(`
  x = f32[2,3] parameter(0)
  t1 = f32[3,2] transpose(x), dimensions={1,0}
  t2 = f32[2,3] transpose(t1), dimensions={1,0}
  ROOT n = f32[2,3] negate(t2)`);
    const on = new AlgebraicSimplifier();
    expect(on.run(parseHlo(text))).toBe(true);
    expect(on.fired.get("transpose-transpose")).toBe(1);
    const off = new AlgebraicSimplifier({ disableRules: ["transpose-transpose"] });
    const m = parseHlo(text);
    expect(off.run(m)).toBe(false);
    expect(normalize(m)).toBe(normalize(text));
  });

  it("a rule that throws is reported with its name and the instruction", () => {
    const bad = new AlgebraicSimplifier({
      rules: [{ name: "boom", opcodes: ["negate"], rewrite: () => { throw new Error("no"); } }],
    });
    const m = parseHlo(entry(`
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)`));
    expect(() => bad.run(m)).toThrow(/rule 'boom' failed on %n \(negate f32\[2\]\): no/);
  });

  it("a rule whose replacement has another shape is rejected", () => {
    const bad = new AlgebraicSimplifier({
      rules: [{ name: "wrong", opcodes: ["convert"], rewrite: (i) => i.operand(0) }],
    });
    const m = parseHlo(entry(`
  x = f32[2] parameter(0)
  ROOT c = s32[2] convert(x)`));
    expect(() => bad.run(m)).toThrow(/rule 'wrong' replaced %c \(s32\[2\]\) with %x \(f32\[2\]\)/);
  });
});
