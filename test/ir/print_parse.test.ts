// Printer and parser together: every module of a hand-written corpus (covering every opcode and
// attribute form) reaches a print→parse→print fixed point; the printed text is checked exactly
// where the format matters; XLA's own syntax variants (no `%`, no operand shapes, comments,
// header attributes, entry first) parse to the expected structure; literals and floats
// round-trip bit-exactly (property tests).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defaultWindowDim } from "../../ir/attributes.ts";
import { ParseError } from "../../ir/errors.ts";
import {
  f16BitsToNumber,
  bf16BitsToNumber,
  literal,
  Literal,
  literalsIdentical,
  scalarLiteral,
} from "../../ir/literal.ts";
import { Module } from "../../ir/module.ts";
import { OPCODES } from "../../ir/opcodes.ts";
import { parseHlo, parseLiteralText, parseShape } from "../../ir/parse.ts";
import { verifyModule } from "../../ir/verify.ts";
import {
  formatFloat,
  printHlo,
  printInstruction,
  printLiteral,
  printPadding,
  printSlice,
  printWindow,
} from "../../ir/print.ts";
import {
  arrayShape,
  ELEMENT_TYPES,
  type ElementType,
  scalarShape,
  tupleShape,
} from "../../ir/shape.ts";
import { ELEMENT_TYPE_INFO } from "../../ir/element_types.ts";
import { smallFloatFromBits } from "../../ir/small_floats.ts";
import { DIALECT_FORMS } from "./corpus/dialect_forms.ts";

/** print(parse(text)) is a fixed point of print∘parse; returns the printed text. */
function roundTrip(text: string): string {
  const once = printHlo(parseHlo(text));
  const twice = printHlo(parseHlo(once));
  expect(twice).toBe(once);
  return once;
}

const CORPUS: Record<string, string> = {
  unary: `
HloModule unary

ENTRY %main (x: f32[4], i: s32[4], b: pred[4]) -> (f32[4], f32[4], f32[4], pred[4], s32[4]) {
  %x = f32[4]{0} parameter(0)
  %i = s32[4]{0} parameter(1)
  %b = pred[4]{0} parameter(2)
  %abs = f32[4]{0} abs(f32[4]{0} %x)
  %neg = f32[4]{0} negate(f32[4]{0} %abs)
  %sign = f32[4]{0} sign(f32[4]{0} %neg)
  %exp = f32[4]{0} exponential(f32[4]{0} %sign)
  %expm1 = f32[4]{0} exponential-minus-one(f32[4]{0} %exp)
  %log = f32[4]{0} log(f32[4]{0} %expm1)
  %log1p = f32[4]{0} log-plus-one(f32[4]{0} %log)
  %sqrt = f32[4]{0} sqrt(f32[4]{0} %log1p)
  %rsqrt = f32[4]{0} rsqrt(f32[4]{0} %sqrt)
  %cbrt = f32[4]{0} cbrt(f32[4]{0} %rsqrt)
  %tanh = f32[4]{0} tanh(f32[4]{0} %cbrt)
  %logistic = f32[4]{0} logistic(f32[4]{0} %tanh)
  %sine = f32[4]{0} sine(f32[4]{0} %logistic)
  %cosine = f32[4]{0} cosine(f32[4]{0} %sine)
  %tan = f32[4]{0} tan(f32[4]{0} %cosine)
  %erf = f32[4]{0} erf(f32[4]{0} %tan)
  %floor = f32[4]{0} floor(f32[4]{0} %erf)
  %ceil = f32[4]{0} ceil(f32[4]{0} %floor)
  %afz = f32[4]{0} round-nearest-afz(f32[4]{0} %ceil)
  %even = f32[4]{0} round-nearest-even(f32[4]{0} %afz)
  %copy = f32[4]{0} copy(f32[4]{0} %even)
  %fin = pred[4]{0} is-finite(f32[4]{0} %copy)
  %not = pred[4]{0} not(pred[4]{0} %b)
  %and = pred[4]{0} and(pred[4]{0} %fin, pred[4]{0} %not)
  %conv = f32[4]{0} convert(s32[4]{0} %i)
  %bits = s32[4]{0} bitcast-convert(f32[4]{0} %conv)
  %noti = s32[4]{0} not(s32[4]{0} %bits)
  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, pred[4]{0}, s32[4]{0}) tuple(f32[4]{0} %copy,
      f32[4]{0} %conv, f32[4]{0} %x, pred[4]{0} %and, s32[4]{0} %noti)
}
`,
  binary: `
HloModule binary

ENTRY %main (a: f32[2,3], b: f32[2,3], i: s32[2,3], j: s32[2,3]) -> (f32[2,3], s32[2,3],
      pred[2,3]) {
  %a = f32[2,3]{1,0} parameter(0)
  %b = f32[2,3]{1,0} parameter(1)
  %i = s32[2,3]{1,0} parameter(2)
  %j = s32[2,3]{1,0} parameter(3)
  %add = f32[2,3]{1,0} add(f32[2,3]{1,0} %a, f32[2,3]{1,0} %b)
  %sub = f32[2,3]{1,0} subtract(f32[2,3]{1,0} %add, f32[2,3]{1,0} %b)
  %mul = f32[2,3]{1,0} multiply(f32[2,3]{1,0} %sub, f32[2,3]{1,0} %a)
  %div = f32[2,3]{1,0} divide(f32[2,3]{1,0} %mul, f32[2,3]{1,0} %b)
  %rem = f32[2,3]{1,0} remainder(f32[2,3]{1,0} %div, f32[2,3]{1,0} %b)
  %pow = f32[2,3]{1,0} power(f32[2,3]{1,0} %rem, f32[2,3]{1,0} %a)
  %max = f32[2,3]{1,0} maximum(f32[2,3]{1,0} %pow, f32[2,3]{1,0} %a)
  %min = f32[2,3]{1,0} minimum(f32[2,3]{1,0} %max, f32[2,3]{1,0} %b)
  %atan2 = f32[2,3]{1,0} atan2(f32[2,3]{1,0} %min, f32[2,3]{1,0} %a)
  %iand = s32[2,3]{1,0} and(s32[2,3]{1,0} %i, s32[2,3]{1,0} %j)
  %ior = s32[2,3]{1,0} or(s32[2,3]{1,0} %iand, s32[2,3]{1,0} %j)
  %ixor = s32[2,3]{1,0} xor(s32[2,3]{1,0} %ior, s32[2,3]{1,0} %j)
  %shl = s32[2,3]{1,0} shift-left(s32[2,3]{1,0} %ixor, s32[2,3]{1,0} %j)
  %sra = s32[2,3]{1,0} shift-right-arithmetic(s32[2,3]{1,0} %shl, s32[2,3]{1,0} %j)
  %srl = s32[2,3]{1,0} shift-right-logical(s32[2,3]{1,0} %sra, s32[2,3]{1,0} %j)
  %lt = pred[2,3]{1,0} compare(f32[2,3]{1,0} %atan2, f32[2,3]{1,0} %b), direction=LT
  %ge = pred[2,3]{1,0} compare(f32[2,3]{1,0} %a, f32[2,3]{1,0} %b), direction=GE, type=TOTALORDER
  %eq = pred[2,3]{1,0} compare(s32[2,3]{1,0} %i, s32[2,3]{1,0} %j), direction=EQ, type=SIGNED
  %ne = pred[2,3]{1,0} compare(pred[2,3]{1,0} %lt, pred[2,3]{1,0} %ge), direction=NE
  %both = pred[2,3]{1,0} or(pred[2,3]{1,0} %ne, pred[2,3]{1,0} %eq)
  %sel = f32[2,3]{1,0} select(pred[2,3]{1,0} %both, f32[2,3]{1,0} %a, f32[2,3]{1,0} %b)
  %lo = f32[] constant(-1)
  %hi = f32[] constant(1)
  %clamp = f32[2,3]{1,0} clamp(f32[] %lo, f32[2,3]{1,0} %sel, f32[] %hi)
  ROOT %t = (f32[2,3]{1,0}, s32[2,3]{1,0}, pred[2,3]{1,0}) tuple(f32[2,3]{1,0} %clamp,
      s32[2,3]{1,0} %srl, pred[2,3]{1,0} %both)
}
`,
  movement: `
HloModule movement

ENTRY %main (x: f32[4,6], s: s32[]) -> (f32[2,4,3], f32[6,4], f32[2,3], f32[8,6], f32[7,8]) {
  %x = f32[4,6]{1,0} parameter(0)
  %s = s32[] parameter(1)
  %scalar = f32[] constant(2)
  %bcast = f32[4,6]{1,0} broadcast(f32[] %scalar), dimensions={}
  %row = f32[6]{0} slice(f32[4,6]{1,0} %x), slice={[0:1], [0:6]}
  %b2 = f32[2,4,6]{2,1,0} broadcast(f32[4,6]{1,0} %bcast), dimensions={1,2}
  %reshape = f32[2,4,3,2]{3,2,1,0} reshape(f32[2,4,6]{2,1,0} %b2)
  %sl = f32[2,4,3,1]{3,2,1,0} slice(f32[2,4,3,2]{3,2,1,0} %reshape), slice={[0:2], [0:4], [0:3],
      [1:2:2]}
  %r3 = f32[2,4,3]{2,1,0} reshape(f32[2,4,3,1]{3,2,1,0} %sl)
  %tr = f32[6,4]{0,1} transpose(f32[4,6]{1,0} %x), dimensions={1,0}
  %bc = f32[6,4]{0,1} bitcast(f32[4,6]{1,0} %x)
  %rid = u32[] replica-id()
  %pid = u32[] partition-id()
  %tok = token[] after-all()
  %tok2 = token[] after-all(token[] %tok, token[] %tok)
  %strided = f32[2,3]{1,0} slice(f32[4,6]{1,0} %x), slice={[0:4:2], [1:6:2]}
  %ds = f32[2,3]{1,0} dynamic-slice(f32[4,6]{1,0} %x, s32[] %s, s32[] %s), dynamic_slice_sizes={2,3}
  %dus = f32[4,6]{1,0} dynamic-update-slice(f32[4,6]{1,0} %x, f32[2,3]{1,0} %ds, s32[] %s, s32[] %s)
  %cat = f32[8,6]{1,0} concatenate(f32[4,6]{1,0} %x, f32[4,6]{1,0} %dus), dimensions={0}
  %zero = f32[] constant(0)
  %pad = f32[7,8]{1,0} pad(f32[4,6]{1,0} %x, f32[] %zero), padding=0_1_1x-1_3_0
  %pad2 = f32[5,6]{1,0} pad(f32[4,6]{1,0} %x, f32[] %zero), padding=1_0x0_0
  %rev = f32[5,6]{1,0} reverse(f32[5,6]{1,0} %pad2), dimensions={0,1}
  %iota = s32[4,6]{1,0} iota(), iota_dimension=1
  ROOT %t = (f32[2,4,3]{2,1,0}, f32[6,4]{0,1}, f32[2,3]{1,0}, f32[8,6]{1,0},
      f32[7,8]{1,0}) tuple(f32[2,4,3]{2,1,0} %r3, f32[6,4]{0,1} %tr, f32[2,3]{1,0} %strided,
      f32[8,6]{1,0} %cat, f32[7,8]{1,0} %pad)
}
`,
  contractions: `
HloModule contractions

ENTRY %main (a: f32[8,2,3], b: f32[8,3,5], img: f32[1,9,9,4], k: f32[3,3,2,6]) -> (f32[8,2,5],
      f32[1,5,5,6], f32[2,5], f32[1,4]) {
  %a = f32[8,2,3]{2,1,0} parameter(0)
  %b = f32[8,3,5]{2,1,0} parameter(1)
  %img = f32[1,9,9,4]{3,2,1,0} parameter(2)
  %k = f32[3,3,2,6]{3,2,1,0} parameter(3)
  %bmm = f32[8,2,5]{2,1,0} dot(f32[8,2,3]{2,1,0} %a, f32[8,3,5]{2,1,0} %b), lhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %a0 = f32[2,3]{1,0} reshape(f32[8,2,3]{2,1,0} %a)
  %b0 = f32[3,5]{1,0} reshape(f32[8,3,5]{2,1,0} %b)
  %mm = f32[2,5]{1,0} dot(f32[2,3]{1,0} %a0, f32[3,5]{1,0} %b0), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, operand_precision={highest,highest}
  %conv = f32[1,5,5,6]{3,2,1,0} convolution(f32[1,9,9,4]{3,2,1,0} %img, f32[3,3,2,6]{3,2,1,0} %k),
      window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1},
      dim_labels=b01f_01io->b01f, feature_group_count=2
  %dil = f32[1,5,5,6]{3,2,1,0} convolution(f32[1,9,9,4]{3,2,1,0} %img, f32[3,3,2,6]{3,2,1,0} %k),
      window={size=3x3 stride=2x1 pad=0_1x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1},
      dim_labels=b01f_01io->b01f, feature_group_count=2, batch_group_count=1
  %b2 = f32[3,2]{1,0} slice(f32[3,5]{1,0} %b0), slice={[0:3], [0:2]}
  %mm2 = f32[2,2]{1,0} dot(f32[2,3]{1,0} %a0, f32[3,2]{1,0} %b2)
  %v = f32[1,4]{1,0} reshape(f32[2,2]{1,0} %mm2)
  %w = f32[4,6]{1,0} reshape(f32[3,3,2,6]{3,2,1,0} %k)
  %x = f32[1,4]{1,0} slice(f32[1,4]{1,0} %v), slice={[0:1], [0:4]}
  %fc = f32[1,6]{1,0} convolution(f32[1,4]{1,0} %x, f32[4,6]{1,0} %w), dim_labels=bf_io->bf
  %fcs = f32[1,4]{1,0} slice(f32[1,6]{1,0} %fc), slice={[0:1], [0:4]}
  ROOT %t = (f32[8,2,5]{2,1,0}, f32[1,5,5,6]{3,2,1,0}, f32[2,5]{1,0},
      f32[1,4]{1,0}) tuple(f32[8,2,5]{2,1,0} %bmm, f32[1,5,5,6]{3,2,1,0} %conv, f32[2,5]{1,0} %mm,
      f32[1,4]{1,0} %fcs)
}
`,
  reductions: `
HloModule reductions

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

%argmax (v0: f32[], i0: s32[], v1: f32[], i1: s32[]) -> (f32[], s32[]) {
  %v0 = f32[] parameter(0)
  %i0 = s32[] parameter(1)
  %v1 = f32[] parameter(2)
  %i1 = s32[] parameter(3)
  %gt = pred[] compare(f32[] %v0, f32[] %v1), direction=GT
  %v = f32[] select(pred[] %gt, f32[] %v0, f32[] %v1)
  %i = s32[] select(pred[] %gt, s32[] %i0, s32[] %i1)
  ROOT %r = (f32[], s32[]) tuple(f32[] %v, s32[] %i)
}

ENTRY %main (in: f32[4,8]) -> ((f32[4], s32[4]), f32[4], f32[2,4]) {
  %in = f32[4,8]{1,0} parameter(0)
  %idx = s32[4,8]{1,0} iota(), iota_dimension=1
  %ninf = f32[] constant(-inf)
  %z = s32[] constant(0)
  %am = (f32[4]{0}, s32[4]{0}) reduce(f32[4,8]{1,0} %in, s32[4,8]{1,0} %idx, f32[] %ninf, s32[] %z),
      dimensions={1}, to_apply=%argmax
  %zero = f32[] constant(0)
  %total = f32[4]{0} reduce(f32[4,8]{1,0} %in, f32[] %zero), dimensions={1}, to_apply=%add
  %rw = f32[2,4]{1,0} reduce-window(f32[4,8]{1,0} %in, f32[] %zero), window={size=2x2 stride=2x2},
      to_apply=%add
  %rw1 = f32[4,8]{1,0} reduce-window(f32[4,8]{1,0} %in, f32[] %zero), window={size=1x3 pad=0_0x1_1},
      to_apply=%add
  ROOT %t = ((f32[4]{0}, s32[4]{0}), f32[4]{0}, f32[2,4]{1,0}) tuple((f32[4]{0}, s32[4]{0}) %am,
      f32[4]{0} %total, f32[2,4]{1,0} %rw)
}
`,
  indexing: `
HloModule indexing

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%less (k0: f32[], k1: f32[], v0: s32[], v1: s32[]) -> pred[] {
  %k0 = f32[] parameter(0)
  %k1 = f32[] parameter(1)
  %v0 = s32[] parameter(2)
  %v1 = s32[] parameter(3)
  ROOT %lt = pred[] compare(f32[] %k0, f32[] %k1), direction=LT, type=TOTALORDER
}

ENTRY %main (x: f32[5,3], ix: s32[2,1], u: f32[2,3], y: f32[2,5,3], bix: s32[2,4,1]) -> (f32[2,3],
      f32[5,3], f32[2,4,3], f32[5,3], s32[5,3]) {
  %x = f32[5,3]{1,0} parameter(0)
  %ix = s32[2,1]{1,0} parameter(1)
  %u = f32[2,3]{1,0} parameter(2)
  %y = f32[2,5,3]{2,1,0} parameter(3)
  %bix = s32[2,4,1]{2,1,0} parameter(4)
  %g = f32[2,3]{1,0} gather(f32[5,3]{1,0} %x, s32[2,1]{1,0} %ix), offset_dims={1},
      collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3},
      indices_are_sorted=true
  %bg = f32[2,4,3]{2,1,0} gather(f32[2,5,3]{2,1,0} %y, s32[2,4,1]{2,1,0} %bix), offset_dims={2},
      collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0},
      start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,3}
  %sc = f32[5,3]{1,0} scatter(f32[5,3]{1,0} %x, s32[2,1]{1,0} %ix, f32[2,3]{1,0} %u),
      update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1, indices_are_sorted=true, unique_indices=true, to_apply=%add
  %bsc = f32[2,5,3]{2,1,0} scatter(f32[2,5,3]{2,1,0} %y, s32[2,4,1]{2,1,0} %bix,
      f32[2,4,3]{2,1,0} %bg), update_window_dims={2}, inserted_window_dims={1},
      scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0},
      index_vector_dim=2, to_apply=%add
  %iota = s32[5,3]{1,0} iota(), iota_dimension=0
  %sorted = (f32[5,3]{1,0}, s32[5,3]{1,0}) sort(f32[5,3]{1,0} %x, s32[5,3]{1,0} %iota),
      dimensions={0}, is_stable=true, to_apply=%less
  %sk = f32[5,3]{1,0} get-tuple-element((f32[5,3]{1,0}, s32[5,3]{1,0}) %sorted), index=0
  %sv = s32[5,3]{1,0} get-tuple-element((f32[5,3]{1,0}, s32[5,3]{1,0}) %sorted), index=1
  ROOT %t = (f32[2,3]{1,0}, f32[5,3]{1,0}, f32[2,4,3]{2,1,0}, f32[5,3]{1,0},
      s32[5,3]{1,0}) tuple(f32[2,3]{1,0} %g, f32[5,3]{1,0} %sc, f32[2,4,3]{2,1,0} %bg,
      f32[5,3]{1,0} %sk, s32[5,3]{1,0} %sv)
}
`,
  control: `
HloModule control

%cond (s: (s32[], f32[3])) -> pred[] {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[3]{0}) %s), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

%body (s.1: (s32[], f32[3])) -> (s32[], f32[3]) {
  %s.1 = (s32[], f32[3]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element((s32[], f32[3]{0}) %s.1), index=0
  %v = f32[3]{0} get-tuple-element((s32[], f32[3]{0}) %s.1), index=1
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %i.1, s32[] %one)
  %dbl = f32[3]{0} add(f32[3]{0} %v, f32[3]{0} %v)
  ROOT %out = (s32[], f32[3]{0}) tuple(s32[] %next, f32[3]{0} %dbl)
}

%on_true (a: f32[3]) -> f32[3] {
  %a = f32[3]{0} parameter(0)
  ROOT %na = f32[3]{0} negate(f32[3]{0} %a)
}

%on_false (b: f32[3]) -> f32[3] {
  %b = f32[3]{0} parameter(0)
  ROOT %cb = f32[3]{0} copy(f32[3]{0} %b)
}

%branch2 (c: f32[3]) -> f32[3] {
  %c = f32[3]{0} parameter(0)
  ROOT %ec = f32[3]{0} exponential(f32[3]{0} %c)
}

%fused (p0: f32[3], p1: f32[3]) -> f32[3] {
  %p0 = f32[3]{0} parameter(0)
  %p1 = f32[3]{0} parameter(1)
  %m = f32[3]{0} multiply(f32[3]{0} %p0, f32[3]{0} %p1)
  ROOT %r = f32[3]{0} add(f32[3]{0} %m, f32[3]{0} %p1)
}

%callee (q: f32[3]) -> f32[3] {
  %q = f32[3]{0} parameter(0)
  ROOT %fq = f32[3]{0} fusion(f32[3]{0} %q, f32[3]{0} %q), kind=kLoop, calls=%fused
}

ENTRY %main (x: f32[3], p: pred[], k: s32[]) -> (f32[3], f32[3], f32[3], f32[3], (s32[], f32[3])) {
  %x = f32[3]{0} parameter(0)
  %p = pred[] parameter(1)
  %k = s32[] parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[3]{0}) tuple(s32[] %zero, f32[3]{0} %x)
  %loop = (s32[], f32[3]{0}) while((s32[], f32[3]{0}) %init), condition=%cond, body=%body
  %c2 = f32[3]{0} conditional(pred[] %p, f32[3]{0} %x, f32[3]{0} %x), true_computation=%on_true,
      false_computation=%on_false
  %cn = f32[3]{0} conditional(s32[] %k, f32[3]{0} %x, f32[3]{0} %x, f32[3]{0} %x),
      branch_computations={%on_true, %on_false, %branch2}
  %called = f32[3]{0} call(f32[3]{0} %x), to_apply=%callee
  %fz = f32[3]{0} fusion(f32[3]{0} %x, f32[3]{0} %called), kind=kInput, calls=%fused
  ROOT %t = (f32[3]{0}, f32[3]{0}, f32[3]{0}, f32[3]{0}, (s32[], f32[3]{0})) tuple(f32[3]{0} %c2,
      f32[3]{0} %cn, f32[3]{0} %called, f32[3]{0} %fz, (s32[], f32[3]{0}) %loop)
}
`,
  dynamic: `
HloModule dynamic

ENTRY %main (x: f32[<=16,8], n: s32[]) -> (f32[<=16,8], s32[], f32[<=4,8]) {
  %x = f32[<=16,8]{1,0} parameter(0)
  %n = s32[] parameter(1)
  %size = s32[] get-dimension-size(f32[<=16,8]{1,0} %x), dimensions={0}
  %e = f32[<=16,8]{1,0} exponential(f32[<=16,8]{1,0} %x)
  %small = f32[4,8]{1,0} slice(f32[<=16,8]{1,0} %e), slice={[0:4], [0:8]}
  %dyn = f32[<=4,8]{1,0} set-dimension-size(f32[4,8]{1,0} %small, s32[] %n), dimensions={0}
  ROOT %t = (f32[<=16,8]{1,0}, s32[], f32[<=4,8]{1,0}) tuple(f32[<=16,8]{1,0} %e, s32[] %size,
      f32[<=4,8]{1,0} %dyn)
}
`,
  custom: `
HloModule custom_call

ENTRY %main (x: f32[2,2]) -> (f32[2,2], s32[]) {
  %x = f32[2,2]{0,1} parameter(0), metadata={op_type="input" op_name="model/x"}
  %cc = (f32[2,2]{1,0}, s32[]) custom-call(f32[2,2]{0,1} %x), custom_call_target="my_op",
      backend_config="{\\"k\\": 1}\\n\\ttab",
      metadata={op_type="myOp" op_name="model/\\"quoted\\"/op" source_file="dir\\\\file.ts"
      source_line=12 source_column=5}
  %nullary = s32[] custom-call(), custom_call_target="tick"
  %a = f32[2,2]{1,0} get-tuple-element((f32[2,2]{1,0}, s32[]) %cc), index=0
  ROOT %t = (f32[2,2]{1,0}, s32[]) tuple(f32[2,2]{1,0} %a, s32[] %nullary), metadata={source_line=3}
}
`,
  ...DIALECT_FORMS,
  constants: `
HloModule constants

ENTRY %main () -> (f32[6], f16[4], bf16[4], s32[2,2], s64[3], u8[3], pred[2,2], f32[2,1,3], f32[0],
      f32[2,0], pred[], s64[]) {
  %f = f32[6]{0} constant({1.5, -0, inf, -inf, nan, 0.1})
  %h = f16[4]{0} constant({0.1, 65504, 6e-08, -2.5})
  %bf = bf16[4]{0} constant({0.1, 3.39e+38, 1e-10, -7})
  %i = s32[2,2]{1,0} constant({ { 1, -2147483648 }, { 2147483647, 0 } })
  %l = s64[3]{0} constant({9223372036854775807, -9223372036854775808, 12345678901234567})
  %u = u8[3]{0} constant({0, 128, 255})
  %p = pred[2,2]{1,0} constant({ { true, false }, { false, true } })
  %r3 = f32[2,1,3]{2,1,0} constant({ { { 1, 2, 3 } }, { { 4, 5, 6 } } })
  %empty = f32[0]{0} constant({})
  %empty2 = f32[2,0]{1,0} constant({ {}, {} })
  %t = pred[] constant(true)
  %big = s64[] constant(-42)
  %tiny = f32[] constant(1e-45)
  %third = f32[] constant(0.33333334)
  %large = f32[] constant(3.4028235e+38)
  ROOT %tuple = (f32[6]{0}, f16[4]{0}, bf16[4]{0}, s32[2,2]{1,0}, s64[3]{0}, u8[3]{0},
      pred[2,2]{1,0}, f32[2,1,3]{2,1,0}, f32[0]{0}, f32[2,0]{1,0}, pred[], s64[])
      tuple(f32[6]{0} %f, f16[4]{0} %h, bf16[4]{0} %bf, s32[2,2]{1,0} %i, s64[3]{0} %l, u8[3]{0} %u,
      pred[2,2]{1,0} %p,
      f32[2,1,3]{2,1,0} %r3, f32[0]{0} %empty, f32[2,0]{1,0} %empty2, pred[] %t, s64[] %big)
}
`,
};

describe("print → parse → print fixed point", () => {
  for (const [name, text] of Object.entries(CORPUS)) {
    it(`corpus module '${name}'`, () => {
      roundTrip(text);
    });
  }

  it("the corpus covers every opcode", () => {
    const seen = new Set<string>();
    for (const text of Object.values(CORPUS)) {
      for (const i of parseHlo(text).allInstructions()) seen.add(i.opcode);
    }
    expect(OPCODES.filter((op) => !seen.has(op))).toEqual([]);
  });

  it("prints each corpus module exactly as written (modulo dropped defaults)", () => {
    // The corpus is written in the printer's own format (long lines wrapped with a six-space
    // indent), so printing it back gives the same text, except `operand_precision` (read and
    // dropped) and attributes at their defaults.
    for (const text of Object.values(CORPUS)) {
      const expected = text
        .trim()
        .replace(/\n {6}/g, " ")
        .replace(", operand_precision={highest,highest}", "")
        .replace(", batch_group_count=1", "")
        .replace(" lhs_dilate=1x1 rhs_dilate=1x1}", "}");
      expect(printHlo(parseHlo(text)).trim()).toBe(expected);
    }
  });
});

describe("printer format", () => {
  it("prints the example module of the design", () => {
    const m = new Module("mlp");
    const add = m.addComputation("add.1");
    const x = add.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 0 },
      name: "x",
    });
    const y = add.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 1 },
      name: "y",
    });
    add.addInstruction({
      opcode: "add",
      shape: scalarShape("f32"),
      operands: [x, y],
      name: "add.2",
    });
    const main = m.addComputation("main");
    m.entry = main;
    const p = main.addInstruction({
      opcode: "parameter",
      shape: arrayShape("f32", [2, "<=8"], undefined, [1, 0]),
      attrs: { parameterNumber: 0 },
      name: "p",
    });
    const c = main.addInstruction({
      opcode: "constant",
      shape: scalarShape("f32"),
      attrs: { literal: scalarLiteral("f32", 0) },
      name: "c",
    });
    main.addInstruction({
      opcode: "reduce",
      shape: arrayShape("f32", [2]),
      operands: [p, c],
      attrs: { dimensions: [1] },
      called: [add],
      metadata: {
        opType: "sum",
        opName: "model/sum",
        sourceFile: "model.ts",
        sourceLine: 12,
        sourceColumn: 5,
      },
      name: "r",
    });
    const expected = [
      "HloModule mlp",
      "",
      "%add.1 (x: f32[], y: f32[]) -> f32[] {",
      "  %x = f32[] parameter(0)",
      "  %y = f32[] parameter(1)",
      "  ROOT %add.2 = f32[] add(f32[] %x, f32[] %y)",
      "}",
      "",
      "ENTRY %main (p: f32[2,<=8]) -> f32[2] {",
      "  %p = f32[2,<=8]{1,0} parameter(0)",
      "  %c = f32[] constant(0)",
      "  ROOT %r = f32[2] reduce(f32[2,<=8]{1,0} %p, f32[] %c), dimensions={1}, " +
        "to_apply=%add.1, metadata={op_type=\"sum\" op_name=\"model/sum\" " +
        'source_file="model.ts" source_line=12 source_column=5}',
      "}",
      "",
    ].join("\n");
    expect(printHlo(m)).toBe(expected);
    expect(printHlo(m, { metadata: false })).not.toContain("metadata");
    expect(printHlo(parseHlo(expected))).toBe(expected);
  });

  it("orders callees before callers, ties by module order, entry last", () => {
    const text = `
HloModule order
ENTRY %main (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %c = f32[] call(f32[] %x), to_apply=%outer
}
%unused (u: f32[]) -> f32[] {
  ROOT %u = f32[] parameter(0)
}
%outer (o: f32[]) -> f32[] {
  %o = f32[] parameter(0)
  ROOT %oc = f32[] call(f32[] %o), to_apply=%inner
}
%inner (i: f32[]) -> f32[] {
  ROOT %i = f32[] parameter(0)
}
`;
    const printed = roundTrip(text);
    const heads = printed.split("\n").filter((l) => l.endsWith("{"));
    expect(heads).toEqual([
      "%unused (u: f32[]) -> f32[] {",
      "%inner (i: f32[]) -> f32[] {",
      "%outer (o: f32[]) -> f32[] {",
      "ENTRY %main (x: f32[]) -> f32[] {",
    ]);
  });

  it("prints a non-topological instruction list in an order the parser accepts", () => {
    const m = parseHlo(`
HloModule m
ENTRY %e (a: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] negate(%a)
  ROOT %c = f32[] abs(%b)
}`);
    const e = m.entry;
    const [a, b, c] = e.instructions;
    e.setOrder([c!, b!, a!]);
    const printed = printHlo(m);
    expect(printed).toContain("  %a = f32[] parameter(0)\n  %b = f32[] negate(f32[] %a)\n");
    expect(printHlo(parseHlo(printed))).toBe(printed);
  });

  it("sanitizes names the text cannot hold, keeping them unique, so the text parses", () => {
    const m = new Module("my model");
    const f = m.addComputation("f/g");
    f.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 0 },
      name: "in put",
    });
    const e = m.addComputation("main");
    m.entry = e;
    const a = e.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 0 },
      name: "a/b",
    });
    const b = e.addInstruction({ opcode: "negate", shape: a.shape, operands: [a], name: "a_b" });
    e.addInstruction({ opcode: "call", shape: a.shape, operands: [b], called: [f], name: "" });
    const printed = printHlo(m);
    expect(printed).toContain("HloModule my_model\n");
    expect(printed).toContain("%f_g (in_put: f32[]) -> f32[] {");
    expect(printed).toContain("%a_b.1 = f32[] parameter(0)");
    expect(printed).toContain("%a_b = f32[] negate(f32[] %a_b.1)");
    expect(printed).toContain("ROOT %_ = f32[] call(f32[] %a_b), to_apply=%f_g");
    const back = parseHlo(printed);
    expect(back.entry.instructions.map((i) => i.name)).toEqual(["a_b.1", "a_b", "_"]);
    expect(printHlo(back)).toBe(printed);
  });

  it("canonicalNames names everything by position, so renamings print the same", () => {
    const text = CORPUS.control!;
    const renamed = text
      .replace(/%x\b/g, "%input")
      .replace(/%body\b/g, "%loop_body")
      .replace(/%fused\b/g, "%f.7")
      .replace(/^HloModule control/, "HloModule other");
    expect(renamed).not.toBe(text);
    const canon = (t: string) => printHlo(parseHlo(t), { canonicalNames: true, metadata: false });
    const printed = canon(text);
    expect(canon(renamed)).toBe(printed);
    expect(printed.startsWith("HloModule m\n\n")).toBe(true);
    for (const [, name] of printed.matchAll(/%([\w.-]+)/g)) expect(name).toMatch(/^[cv]\d+$/);
    expect(printed).toMatch(/ENTRY %c\d+ \(v\d+: f32\[3\], v\d+: pred\[\], v\d+: s32\[\]\) -> \(/);
    expect(printed).toMatch(/condition=%c\d+, body=%c\d+/);
    expect(printed).not.toMatch(/%(x|body|fused|cond)\b/);
    // The canonical text is itself a module whose canonical text it is.
    expect(canon(printed)).toBe(printed);
    const m = parseHlo(text);
    const loop = m.entry.instructions.find((i) => i.name === "loop")!;
    expect(printInstruction(loop, { canonicalNames: true })).toMatch(
      /^%v\d+ = \(s32\[\], f32\[3\]\{0\}\) while\(\(s32\[\], f32\[3\]\{0\}\) %v\d+\), condition=%c\d+, body=%c\d+$/,
    );
  });

  it("canonical text does not depend on the order of independent instructions", () => {
    const a = `HloModule a
ENTRY %main (x: f32[2], y: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  %y = f32[2] parameter(1)
  %e = f32[2] exponential(%x)
  %n = f32[2] negate(%y)
  ROOT %r = f32[2] add(%e, %n)
}`;
    const b = a.replace(
      "  %e = f32[2] exponential(%x)\n  %n = f32[2] negate(%y)",
      "  %n = f32[2] negate(%y)\n  %e = f32[2] exponential(%x)",
    );
    expect(b).not.toBe(a);
    const canon = (t: string) => printHlo(parseHlo(t), { canonicalNames: true, metadata: false });
    expect(canon(b)).toBe(canon(a));
  });

  it("prints attribute values the way XLA does", () => {
    expect(printSlice([{ start: 0, limit: 2, stride: 1 }, { start: 1, limit: 9, stride: 2 }])).toBe(
      "{[0:2], [1:9:2]}",
    );
    expect(printPadding([{ low: 0, high: 1, interior: 0 }, { low: 2, high: 2, interior: 0 }])).toBe(
      "0_1x2_2",
    );
    expect(printPadding([{ low: 0, high: 1, interior: 0 }, { low: 2, high: 2, interior: 1 }])).toBe(
      "0_1_0x2_2_1",
    );
    expect(printWindow([defaultWindowDim(1), defaultWindowDim(3)])).toBe("{size=1x3}");
    expect(
      printWindow([
        { ...defaultWindowDim(3), stride: 2, padLow: 1, padHigh: 1 },
        { ...defaultWindowDim(3), baseDilation: 2, windowDilation: 3, windowReversal: true },
      ]),
    ).toBe("{size=3x3 stride=2x1 pad=1_1x0_0 lhs_dilate=1x2 rhs_dilate=1x3 rhs_reversal=0x1}");
    expect(printWindow([])).toBe("{}");
  });

  it("prints literals as XLA does", () => {
    expect(printLiteral(scalarLiteral("f32", 1.5))).toBe("1.5");
    expect(printLiteral(literal("s32", [3], [1, 2, 3]))).toBe("{1, 2, 3}");
    expect(printLiteral(literal("f32", [2, 2], [1, 2, 3, 4]))).toBe("{ { 1, 2 }, { 3, 4 } }");
    expect(printLiteral(literal("pred", [2], [true, false]))).toBe("{true, false}");
    expect(printLiteral(literal("s64", [1], [-(2n ** 63n)]))).toBe("{-9223372036854775808}");
    expect(printLiteral(literal("f32", [0], []))).toBe("{}");
    expect(printLiteral(literal("f32", [1, 0], []))).toBe("{ {} }");
  });

  it("formats floats as the shortest text that reads back exactly", () => {
    expect(formatFloat(0.1)).toBe("0.1");
    expect(formatFloat(Math.fround(0.1))).toBe("0.1");
    expect(formatFloat(Math.fround(1 / 3))).toBe("0.33333334");
    expect(formatFloat(1e10)).toBe("1e+10");
    expect(formatFloat(Math.fround(1e-5))).toBe("1e-05");
    expect(formatFloat(100)).toBe("100");
    expect(formatFloat(16777216)).toBe("16777216");
    expect(formatFloat(-0)).toBe("-0");
    expect(formatFloat(0)).toBe("0");
    expect(formatFloat(NaN)).toBe("nan");
    expect(formatFloat(Infinity)).toBe("inf");
    expect(formatFloat(-Infinity)).toBe("-inf");
    // f16 0.1 is 0.0999755859375; its shortest f16 text is "0.1".
    expect(formatFloat(f16BitsToNumber(0x2e66), "f16")).toBe("0.1");
    expect(formatFloat(bf16BitsToNumber(0x3dcd), "bf16")).toBe("0.1");
  });
});

describe("XLA syntax accepted by the parser", () => {
  it("a convolution with no spatial dims prints no window and reads back valid", () => {
    // Regression: the printer leaves out an empty window, so the parser must default it.
    const text = `HloModule m

ENTRY %main (x: f32[2,3], w: f32[3,4]) -> f32[2,4] {
  %x = f32[2,3] parameter(0)
  %w = f32[3,4] parameter(1)
  ROOT %c = f32[2,4] convolution(f32[2,3] %x, f32[3,4] %w), dim_labels=bf_io->bf
}
`;
    const m = parseHlo(text);
    expect(m.entry.root.attrs.window).toEqual([]);
    verifyModule(m);
    expect(printHlo(m)).toBe(text);
  });

  it("names without %, operands without shapes, comments, header attributes", () => {
    const m = parseHlo(`
HloModule jit_f, entry_computation_layout={(f32[2]{0}, f32[2]{0})->(f32[2]{0}, f32[2]{0})},
      is_scheduled=true, frontend_attributes={a="b"}

// a line comment
add_f32 {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT sum = f32[] add(lhs, rhs)
}

ENTRY main.5 {
  a = f32[2]{0} parameter(0), sharding={replicated}
  /* a block
     comment */ b = f32[2] parameter(1)
  c = f32[2] add(a, /*index=1*/b),
      metadata={op_name="jit(f)/add" deduplicated_name="x" stack_frame_id=3}
  z = f32[] constant(0)
  r = f32[] reduce(c, z), dimensions={0}, to_apply=add_f32
  rb = f32[2] broadcast(r), dimensions={}
  ROOT t = (f32[2], f32[2], f32[2], f32[2], f32[2], /*index=5*/f32[2]) tuple(c, rb, a, b, c,
      /*index=5*/rb)
}, execution_thread="main"
`);
    expect(m.name).toBe("jit_f");
    expect(m.entry.name).toBe("main.5");
    expect(m.computations.map((c) => c.name)).toEqual(["add_f32", "main.5"]);
    const names = m.entry.instructions.map((i) => i.name);
    expect(names).toEqual(["a", "b", "c", "z", "r", "rb", "t"]);
    const r = m.entry.instructions[4]!;
    expect(r.opcode).toBe("reduce");
    expect(r.called.map((c) => c.name)).toEqual(["add_f32"]);
    expect(r.operands.map((o) => o.name)).toEqual(["c", "z"]);
    expect(m.entry.instructions[2]!.metadata).toEqual({ opName: "jit(f)/add" });
    expect(m.entry.root.name).toBe("t");
    expect(m.entry.root.operands.length).toBe(6);
    roundTrip(printHlo(m));
  });

  it("entry first, callee defined after its caller, no ENTRY keyword means the last", () => {
    const first = parseHlo(`
HloModule m
ENTRY %main (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %c = f32[] call(f32[] %x), to_apply=%f
}
%f (y: f32[]) -> f32[] {
  %y = f32[] parameter(0)
  ROOT %n = f32[] negate(f32[] %y)
}
`);
    expect(first.entry.name).toBe("main");
    expect(first.entry.root.called[0]!.name).toBe("f");
    const printed = printHlo(first);
    expect(printed.indexOf("%f (")).toBeLessThan(printed.indexOf("ENTRY %main"));

    const noEntry = parseHlo(`
HloModule m
f {
  y = f32[] parameter(0)
  ROOT n = f32[] negate(y)
}
g {
  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=f
}
`);
    expect(noEntry.entry.name).toBe("g");
  });

  it("a module without a header is named after its entry, as XLA does", () => {
    const m = parseHlo(`ENTRY e { ROOT p = f32[] parameter(0) }`);
    expect(m.name).toBe("module_e");
    expect(m.entry.root.opcode).toBe("parameter");
  });

  it("the ROOT defaults to the last instruction; an explicit ROOT may come earlier", () => {
    const implicit = parseHlo(`HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] negate(a)
}`);
    expect(implicit.entry.root.name).toBe("b");
    const early = parseHlo(`HloModule m
ENTRY e {
  a = f32[] parameter(0)
  ROOT b = f32[] negate(a)
  c = f32[] abs(a)
}`);
    expect(early.entry.root.name).toBe("b");
    expect(roundTrip(printHlo(early))).toContain("ROOT %b");
  });

  it("gives a name reused in another computation a fresh suffix", () => {
    const m = parseHlo(`HloModule m
add { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y) }
max { x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y) }
ENTRY e {
  x.1 = f32[2] parameter(0)
  z = f32[] constant(0)
  a = f32[] reduce(x.1, z), dimensions={0}, to_apply=add
  ROOT b = f32[] reduce(x.1, z), dimensions={0}, to_apply=max
}`);
    const max = m.getComputation("max");
    expect(max.instructions.map((i) => i.name)).toEqual(["x.2", "y.1", "s.1"]);
    expect(m.entry.instructions[0]!.name).toBe("x.1");
    roundTrip(printHlo(m));
  });

  it("reads attributes in any order and backend_config as a JSON dict", () => {
    const m = parseHlo(`HloModule m
r { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[2,4] reduce-window(x, z), to_apply=r, window={stride=2x2 size=2x2},
      backend_config={"k":{"n":[1,2]}}
}`);
    const w = m.entry.root;
    expect(w.attrs.window!.map((d) => [d.size, d.stride])).toEqual([
      [2, 2],
      [2, 2],
    ]);
    expect(w.attrs.backendConfig).toBe('{"k":{"n":[1,2]}}');
    expect(printHlo(m)).toContain(
      'window={size=2x2 stride=2x2}, to_apply=%r, backend_config="{\\"k\\":{\\"n\\":[1,2]}}"',
    );
    roundTrip(printHlo(m));
  });

  it("builds the attribute records of every attribute form", () => {
    const m = parseHlo(CORPUS.indexing!);
    const g = m.entry.instructions.find((i) => i.name === "bg")!;
    expect(g.attrs.gather).toEqual({
      offsetDims: [2],
      collapsedSliceDims: [1],
      startIndexMap: [1],
      indexVectorDim: 2,
      operandBatchingDims: [0],
      startIndicesBatchingDims: [0],
    });
    expect(g.attrs.gatherSliceSizes).toEqual([1, 1, 3]);
    const sc = m.entry.instructions.find((i) => i.name === "sc")!;
    expect(sc.attrs.scatter!.scatterDimsToOperandDims).toEqual([0]);
    expect(sc.attrs.uniqueIndices).toBe(true);
    expect(sc.called.map((c) => c.name)).toEqual(["add"]);
    const sorted = m.entry.instructions.find((i) => i.name === "sorted")!;
    expect(sorted.attrs).toEqual({ dimensions: [0], isStable: true });

    const k = parseHlo(CORPUS.contractions!);
    const conv = k.entry.instructions.find((i) => i.name === "dil")!;
    expect(conv.attrs.convDims!.inputSpatial).toEqual([1, 2]);
    expect(conv.attrs.featureGroupCount).toBe(2);
    expect(conv.attrs.window![1]).toEqual({
      size: 3,
      stride: 1,
      padLow: -1,
      padHigh: 2,
      windowDilation: 1,
      baseDilation: 2,
      windowReversal: true,
    });
    const mm = k.entry.instructions.find((i) => i.name === "mm2")!;
    expect(mm.attrs.dot).toEqual({
      lhsBatch: [],
      rhsBatch: [],
      lhsContracting: [],
      rhsContracting: [],
    });

    const c = parseHlo(CORPUS.control!);
    const loop = c.entry.instructions.find((i) => i.name === "loop")!;
    expect(loop.called.map((x) => x.name)).toEqual(["cond", "body"]);
    const c2 = c.entry.instructions.find((i) => i.name === "c2")!;
    expect(c2.called.map((x) => x.name)).toEqual(["on_true", "on_false"]);
    const cn = c.entry.instructions.find((i) => i.name === "cn")!;
    expect(cn.called.map((x) => x.name)).toEqual(["on_true", "on_false", "branch2"]);
    expect(c.entry.instructions.find((i) => i.name === "fz")!.attrs.fusionKind).toBe("kInput");

    const mv = parseHlo(CORPUS.movement!);
    const pad = mv.entry.instructions.find((i) => i.name === "pad")!;
    expect(pad.attrs.padding).toEqual([
      { low: 0, high: 1, interior: 1 },
      { low: -1, high: 3, interior: 0 },
    ]);
    const sl = mv.entry.instructions.find((i) => i.name === "strided")!;
    expect(sl.attrs.slice).toEqual([
      { start: 0, limit: 4, stride: 2 },
      { start: 1, limit: 6, stride: 2 },
    ]);
    expect(mv.entry.instructions.find((i) => i.name === "tr")!.shape).toEqual(
      arrayShape("f32", [6, 4], undefined, [0, 1]),
    );

    const cc = parseHlo(CORPUS.custom!);
    const call = cc.entry.instructions.find((i) => i.name === "cc")!;
    expect(call.attrs.customCallTarget).toBe("my_op");
    expect(call.attrs.backendConfig).toBe('{"k": 1}\n\ttab');
    expect(call.metadata).toEqual({
      opType: "myOp",
      opName: 'model/"quoted"/op',
      sourceFile: "dir\\file.ts",
      sourceLine: 12,
      sourceColumn: 5,
    });
  });

  it("reads constants of every element type exactly", () => {
    const m = parseHlo(CORPUS.constants!);
    const lit = (name: string): Literal =>
      m.entry.instructions.find((i) => i.name === name)!.attrs.literal!;
    const elems = (name: string): unknown[] =>
      Array.from(lit(name).data as ArrayLike<number | bigint>);
    const f = lit("f").data;
    expect(elems("f").slice(0, 4)).toEqual([1.5, -0, Infinity, -Infinity]);
    expect(Object.is(f[1], -0)).toBe(true);
    expect(Number.isNaN(f[4])).toBe(true);
    expect(f[5]).toBe(Math.fround(0.1));
    expect(elems("h")).toEqual([f16BitsToNumber(0x2e66), 65504, 2 ** -24, -2.5]);
    expect(lit("bf").data[0]).toBe(bf16BitsToNumber(0x3dcd));
    expect(elems("l")).toEqual([2n ** 63n - 1n, -(2n ** 63n), 12345678901234567n]);
    expect(elems("u")).toEqual([0, 128, 255]);
    expect(lit("p").toArray()).toEqual([
      [true, false],
      [false, true],
    ]);
    expect(lit("r3").dims).toEqual([2, 1, 3]);
    expect(lit("empty2").dims).toEqual([2, 0]);
    expect(lit("tiny").data[0]).toBe(2 ** -149);
    expect(lit("large").data[0]).toBe(3.4028234663852886e38);
  });

  it("checks declared operand shapes as XLA does: layouts and dynamic flags aside", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  x = f32[<=8]{0} parameter(0)
  ROOT n = f32[<=8] negate(f32[8] x)
}`);
    expect(m.entry.root.operands[0]!.shape).toEqual(arrayShape("f32", ["<=8"], undefined, [0]));
    expect(() =>
      parseHlo(`HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  ROOT n = f32[8] negate(s32[8] x)
}`),
    ).toThrow(/expected operand 'x' to have its shape f32\[8\], got declared shape s32\[8\]/);
  });

  it("parses shapes on their own", () => {
    expect(parseShape("f32[2,<=8]{1,0}")).toEqual(arrayShape("f32", [2, "<=8"], undefined, [1, 0]));
    expect(parseShape("(f32[2], (s32[], pred[]))")).toEqual(
      tupleShape([arrayShape("f32", [2]), tupleShape([scalarShape("s32"), scalarShape("pred")])]),
    );
    expect(parseShape("()")).toEqual(tupleShape([]));
    expect(parseShape("bf16[/*batch*/ 3, 4]")).toEqual(arrayShape("bf16", [3, 4]));
    expect(() => parseShape("f32[2] x")).toThrow(ParseError);
  });
});

// ---- properties ---------------------------------------------------------------------------

// Every element type with values (a token has none).
const TYPES: readonly ElementType[] = ELEMENT_TYPES.filter((t) => t !== "token");

function arbValue(type: ElementType): fc.Arbitrary<number | bigint | boolean> {
  switch (type) {
    case "pred":
      return fc.boolean();
    case "s32":
      return fc.integer({ min: -2147483648, max: 2147483647 });
    case "s64":
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case "u8":
      return fc.integer({ min: 0, max: 255 });
    case "s4":
    case "s8":
    case "s16":
    case "u4":
    case "u16":
    case "u32": {
      const { min, max } = ELEMENT_TYPE_INFO[type];
      return fc.integer({ min: min as number, max: max as number });
    }
    case "u64":
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case "token":
      throw new Error("a token has no values");
    case "f16":
      return fc.integer({ min: 0, max: 0xffff }).map(f16BitsToNumber);
    case "bf16":
      return fc.integer({ min: 0, max: 0xffff }).map(bf16BitsToNumber);
    case "f32":
      return fc.float({ noDefaultInfinity: false, noNaN: false });
    case "f64":
      return fc.double({ noDefaultInfinity: false, noNaN: false });
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      {
        const t = type;
        return fc.integer({ min: 0, max: 0xff }).map((b) => smallFloatFromBits(t, b));
      }
    default: {
      const never: never = type;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

const arbLiteral: fc.Arbitrary<Literal> = fc
  .record({
    type: fc.constantFrom(...TYPES),
    dims: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 4 }),
  })
  .chain(({ type, dims }) => {
    const n = dims.reduce((a, b) => a * b, 1);
    return fc
      .array(arbValue(type), { minLength: n, maxLength: n })
      .map((values) => literal(type, dims, values));
  });

describe("literal and float properties", () => {
  it("every literal reads back bit-identically from its text", () => {
    fc.assert(
      fc.property(arbLiteral, (lit) => {
        const back = parseLiteralText(lit.type, lit.dims, printLiteral(lit));
        expect(literalsIdentical(back, lit)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it("every literal survives a module round trip as a constant", () => {
    fc.assert(
      fc.property(arbLiteral, (lit) => {
        const m = new Module("lit");
        const e = m.addComputation("e");
        m.entry = e;
        e.addInstruction({ opcode: "constant", shape: lit.shape, attrs: { literal: lit } });
        const text = printHlo(m);
        const back = parseHlo(text).entry.root.attrs.literal!;
        expect(literalsIdentical(back, lit)).toBe(true);
        expect(printHlo(parseHlo(text))).toBe(text);
      }),
      { numRuns: 200 },
    );
  });

  it("formatFloat is the shortest %g text that reads back as the f32 value", () => {
    fc.assert(
      fc.property(fc.float({ noNaN: true }), (v) => {
        const s = formatFloat(v);
        expect(Object.is(Math.fround(Number(s.replace("inf", "Infinity"))), v)).toBe(true);
        const digits = s.replace(/e.*$/, "").replace(/[-.]/g, "").replace(/^0+/, "");
        expect(digits.length).toBeLessThanOrEqual(9);
      }),
      { numRuns: 1000 },
    );
  });

  it("strings (metadata, custom-call target, backend_config) read back exactly", () => {
    const str = fc.string({ unit: "binary", maxLength: 40 });
    fc.assert(
      fc.property(str, str, str, fc.nat(), (opName, target, config, line) => {
        const m = new Module("strings");
        const e = m.addComputation("e");
        m.entry = e;
        e.addInstruction({
          opcode: "custom-call",
          shape: scalarShape("f32"),
          attrs: { customCallTarget: target, backendConfig: config },
          metadata: { opName, sourceFile: `${opName}\\"`, sourceLine: line },
          name: "cc",
        });
        const text = printHlo(m);
        const root = parseHlo(text).entry.root;
        expect(root.metadata).toEqual({ opName, sourceFile: `${opName}\\"`, sourceLine: line });
        expect(root.attrs.customCallTarget).toBe(target);
        expect(root.attrs.backendConfig).toBe(config === "" ? undefined : config);
      }),
      { numRuns: 300 },
    );
  });

  it("reads XLA's octal and hex escapes as UTF-8 bytes", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  ROOT c = f32[] custom-call(), custom_call_target="\\303\\251t\\xc3\\xa9\\101\\t\\?"
}`);
    expect(m.entry.root.attrs.customCallTarget).toBe("\u00e9t\u00e9A\t?");
  });

  it("printInstruction of each instruction appears verbatim in the module text", () => {
    for (const text of Object.values(CORPUS)) {
      const m = parseHlo(text);
      const printed = printHlo(m);
      for (const i of m.allInstructions()) {
        expect(printed).toContain(`  ${printInstruction(i)}\n`);
      }
    }
  });
});
