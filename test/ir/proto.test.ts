// The protobuf form: modules covering every opcode, attribute, element type, layout, dynamic dim
// and control-flow form survive moduleToProto → moduleFromProto with identical HLO text; the
// bytes carry XLA's field numbers and semantics (checked against XLA's schema numbers and by
// reading the fields back with the generated schema); malformed bytes of many kinds are rejected
// with a ProtoError that names what is wrong, and no mutation of valid bytes gets past decoding
// as any other kind of error (property test).

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Attributes } from "../../ir/attributes.ts";
import { ProtoError } from "../../ir/errors.ts";
import { literal, literalsIdentical } from "../../ir/literal.ts";
import { Module } from "../../ir/module.ts";
import { OPCODES } from "../../ir/opcodes.ts";
import { parseHlo, parseShape } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { verifyModule } from "../../ir/verify.ts";
import {
  moduleFromMessage,
  moduleFromProto,
  moduleToMessage,
  moduleToProto,
  PROTO_RECURSION_LIMIT,
} from "../../ir/proto.ts";
import { ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import {
  type HloInstructionProto,
  HloComputationProtoSchema,
  HloInstructionProto_SliceDimensionsSchema,
  HloInstructionProtoSchema,
  type HloModuleProto,
  HloModuleProtoSchema,
} from "../../ir/proto/gen/hlo_pb.ts";
import {
  ConvolutionDimensionNumbersSchema,
  DotDimensionNumbersSchema,
  GatherDimensionNumbersSchema,
  LayoutProtoSchema,
  TileProtoSchema,
  OpShardingSchema,
  FrontendAttributesSchema,
  LiteralProtoSchema,
  OpMetadataSchema,
  PaddingConfig_PaddingConfigDimensionSchema,
  PaddingConfigSchema,
  PrimitiveType,
  PrimitiveTypeSchema,
  ProgramShapeProtoSchema,
  ScatterDimensionNumbersSchema,
  ShapeProtoSchema,
  WindowDimensionSchema,
  WindowSchema,
  ReplicaGroupSchema,
  CollectiveDeviceListProtoSchema,
  IotaReplicaGroupListProtoSchema,
  SourceTargetSchema,
  PrecisionConfigSchema,
  OutputOperandAliasingSchema,
} from "../../ir/proto/gen/xla_data_pb.ts";
import {
  arrayShape,
  ELEMENT_TYPES,
  MAX_TUPLE_DEPTH,
  scalarShape,
  type Shape,
  tupleDepth,
  tupleShape,
} from "../../ir/shape.ts";
import { DIALECT_FORMS } from "./corpus/dialect_forms.ts";

const CORPUS: Record<string, string> = {
  ...DIALECT_FORMS,
  elementwise: `
HloModule elementwise

ENTRY %main (x: f32[4], i: s32[4], b: pred[4], w: u8[4]) -> (f32[4], pred[4], s32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %i = s32[4]{0} parameter(1)
  %b = pred[4]{0} parameter(2)
  %w = u8[4]{0} parameter(3)
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
  %conv = f32[4]{0} convert(s32[4]{0} %i)
  %bits = s32[4]{0} bitcast-convert(f32[4]{0} %conv)
  %add = f32[4]{0} add(f32[4]{0} %x, f32[4]{0} %copy)
  %sub = f32[4]{0} subtract(f32[4]{0} %add, f32[4]{0} %x)
  %mul = f32[4]{0} multiply(f32[4]{0} %sub, f32[4]{0} %x)
  %div = f32[4]{0} divide(f32[4]{0} %mul, f32[4]{0} %x)
  %rem = f32[4]{0} remainder(f32[4]{0} %div, f32[4]{0} %x)
  %pow = f32[4]{0} power(f32[4]{0} %rem, f32[4]{0} %x)
  %max = f32[4]{0} maximum(f32[4]{0} %pow, f32[4]{0} %x)
  %min = f32[4]{0} minimum(f32[4]{0} %max, f32[4]{0} %x)
  %atan2 = f32[4]{0} atan2(f32[4]{0} %min, f32[4]{0} %x)
  %and = s32[4]{0} and(s32[4]{0} %i, s32[4]{0} %bits)
  %or = s32[4]{0} or(s32[4]{0} %and, s32[4]{0} %i)
  %xor = s32[4]{0} xor(s32[4]{0} %or, s32[4]{0} %i)
  %shl = s32[4]{0} shift-left(s32[4]{0} %xor, s32[4]{0} %i)
  %sra = s32[4]{0} shift-right-arithmetic(s32[4]{0} %shl, s32[4]{0} %i)
  %srl = s32[4]{0} shift-right-logical(s32[4]{0} %sra, s32[4]{0} %i)
  %lt = pred[4]{0} compare(f32[4]{0} %atan2, f32[4]{0} %x), direction=LT
  %ge = pred[4]{0} compare(f32[4]{0} %x, f32[4]{0} %x), direction=GE, type=TOTALORDER
  %eq = pred[4]{0} compare(s32[4]{0} %i, s32[4]{0} %srl), direction=EQ, type=SIGNED
  %ne = pred[4]{0} compare(pred[4]{0} %lt, pred[4]{0} %fin), direction=NE
  %le = pred[4]{0} compare(u8[4]{0} %w, u8[4]{0} %w), direction=LE, type=UNSIGNED
  %gt = pred[4]{0} compare(f32[4]{0} %x, f32[4]{0} %x), direction=GT, type=FLOAT
  %any = pred[4]{0} or(pred[4]{0} %ne, pred[4]{0} %eq)
  %all = pred[4]{0} and(pred[4]{0} %any, pred[4]{0} %not)
  %some = pred[4]{0} xor(pred[4]{0} %all, pred[4]{0} %ge)
  %more = pred[4]{0} or(pred[4]{0} %some, pred[4]{0} %le)
  %most = pred[4]{0} or(pred[4]{0} %more, pred[4]{0} %gt)
  %sel = f32[4]{0} select(pred[4]{0} %most, f32[4]{0} %x, f32[4]{0} %atan2)
  %lo = f32[] constant(-1)
  %hi = f32[] constant(1)
  %clamp = f32[4]{0} clamp(f32[] %lo, f32[4]{0} %sel, f32[] %hi)
  ROOT %t = (f32[4]{0}, pred[4]{0}, s32[4]{0}, f32[4]{0}) tuple(f32[4]{0} %clamp,
      pred[4]{0} %most, s32[4]{0} %srl, f32[4]{0} %conv)
}
`,
  movement: `
HloModule movement

ENTRY %main (x: f32[4,6], s: s32[]) -> (f32[2,4,3], f32[6,4], f32[2,3], f32[8,6], f32[8,8]) {
  %x = f32[4,6]{1,0} parameter(0)
  %s = s32[] parameter(1)
  %scalar = f32[] constant(2)
  %bcast = f32[4,6]{1,0} broadcast(f32[] %scalar), dimensions={}
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
  %pad = f32[8,8]{1,0} pad(f32[4,6]{1,0} %x, f32[] %zero), padding=0_1_1x-1_3_0
  %pad2 = f32[5,6]{1,0} pad(f32[4,6]{1,0} %x, f32[] %zero), padding=1_0x0_0
  %spad = f32[] pad(f32[] %zero, f32[] %zero), padding=
  %rev = f32[5,6]{1,0} reverse(f32[5,6]{1,0} %pad2), dimensions={0,1}
  %iota = s32[4,6]{1,0} iota(), iota_dimension=1
  %iota0 = s32[4,6]{1,0} iota(), iota_dimension=0
  ROOT %t = (f32[2,4,3]{2,1,0}, f32[6,4]{0,1}, f32[2,3]{1,0}, f32[8,6]{1,0},
      f32[8,8]{1,0}) tuple(f32[2,4,3]{2,1,0} %r3, f32[6,4]{0,1} %tr, f32[2,3]{1,0} %strided,
      f32[8,6]{1,0} %cat, f32[8,8]{1,0} %pad)
}
`,
  contractions: `
HloModule contractions

ENTRY %main (a: f32[8,2,3], b: f32[8,3,5], img: f32[1,9,9,4], k: f32[3,3,2,6], k2: f32[3,3,1,2])
      -> (f32[8,2,5], f32[1,3,16,6], f32[2,2], f32[1,6], f32[2,5,5,2]) {
  %a = f32[8,2,3]{2,1,0} parameter(0)
  %b = f32[8,3,5]{2,1,0} parameter(1)
  %img = f32[1,9,9,4]{3,2,1,0} parameter(2)
  %k = f32[3,3,2,6]{3,2,1,0} parameter(3)
  %k2 = f32[3,3,1,2]{3,2,1,0} parameter(4)
  %bmm = f32[8,2,5]{2,1,0} dot(f32[8,2,3]{2,1,0} %a, f32[8,3,5]{2,1,0} %b), lhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %a1 = f32[1,2,3]{2,1,0} slice(f32[8,2,3]{2,1,0} %a), slice={[0:1], [0:2], [0:3]}
  %a0 = f32[2,3]{1,0} reshape(f32[1,2,3]{2,1,0} %a1)
  %b1 = f32[1,3,2]{2,1,0} slice(f32[8,3,5]{2,1,0} %b), slice={[0:1], [0:3], [0:2]}
  %b0 = f32[3,2]{1,0} reshape(f32[1,3,2]{2,1,0} %b1)
  %outer = f32[2,3,3,2]{3,2,1,0} dot(f32[2,3]{1,0} %a0, f32[3,2]{1,0} %b0)
  %mm = f32[2,2]{1,0} dot(f32[2,3]{1,0} %a0, f32[3,2]{1,0} %b0), lhs_contracting_dims={1},
      rhs_contracting_dims={0}
  %conv = f32[1,5,5,6]{3,2,1,0} convolution(f32[1,9,9,4]{3,2,1,0} %img, f32[3,3,2,6]{3,2,1,0} %k),
      window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2
  %dil = f32[1,3,16,6]{3,2,1,0} convolution(f32[1,9,9,4]{3,2,1,0} %img, f32[3,3,2,6]{3,2,1,0} %k),
      window={size=3x3 stride=2x1 pad=0_1x-1_2 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1},
      dim_labels=b01f_01io->b01f, feature_group_count=2
  %bg = f32[2,5,5,2]{3,2,1,0} convolution(f32[1,9,9,4]{3,2,1,0} %img, f32[3,3,1,2]{3,2,1,0} %k2),
      window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=f01b_01io->b01f, batch_group_count=2
  %x = f32[1,2]{1,0} slice(f32[2,3]{1,0} %a0), slice={[0:1], [0:2]}
  %x1 = f32[1,1,2]{2,1,0} reshape(f32[1,2]{1,0} %x)
  %k1 = f32[1,1,2,6]{3,2,1,0} slice(f32[3,3,2,6]{3,2,1,0} %k), slice={[0:1], [0:1], [0:2], [0:6]}
  %w = f32[1,2,6]{2,1,0} reshape(f32[1,1,2,6]{3,2,1,0} %k1)
  %fc1 = f32[1,1,6]{2,1,0} convolution(f32[1,1,2]{2,1,0} %x1, f32[1,2,6]{2,1,0} %w),
      window={size=1}, dim_labels=b0f_0io->b0f
  %fc = f32[1,6]{1,0} reshape(f32[1,1,6]{2,1,0} %fc1)
  ROOT %t = (f32[8,2,5]{2,1,0}, f32[1,3,16,6]{3,2,1,0}, f32[2,2]{1,0}, f32[1,6]{1,0},
      f32[2,5,5,2]{3,2,1,0}) tuple(f32[8,2,5]{2,1,0} %bmm, f32[1,3,16,6]{3,2,1,0} %dil,
      f32[2,2]{1,0} %mm, f32[1,6]{1,0} %fc, f32[2,5,5,2]{3,2,1,0} %bg)
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

ENTRY %main (in: f32[4,8]) -> ((f32[4], s32[4]), f32[4], f32[2,4], f32[]) {
  %in = f32[4,8]{1,0} parameter(0)
  %idx = s32[4,8]{1,0} iota(), iota_dimension=1
  %ninf = f32[] constant(-inf)
  %z = s32[] constant(0)
  %am = (f32[4]{0}, s32[4]{0}) reduce(f32[4,8]{1,0} %in, s32[4,8]{1,0} %idx, f32[] %ninf, s32[] %z),
      dimensions={1}, to_apply=%argmax
  %zero = f32[] constant(0)
  %total = f32[4]{0} reduce(f32[4,8]{1,0} %in, f32[] %zero), dimensions={1}, to_apply=%add
  %none = f32[4,8]{1,0} reduce(f32[4,8]{1,0} %in, f32[] %zero), dimensions={}, to_apply=%add
  %all = f32[] reduce(f32[4,8]{1,0} %none, f32[] %zero), dimensions={0,1}, to_apply=%add
  %rw = f32[2,4]{1,0} reduce-window(f32[4,8]{1,0} %in, f32[] %zero), window={size=2x2 stride=2x2},
      to_apply=%add
  %rw1 = f32[4,8]{1,0} reduce-window(f32[4,8]{1,0} %in, f32[] %zero), window={size=1x3 pad=0_0x1_1},
      to_apply=%add
  %rw0 = f32[] reduce-window(f32[] %zero, f32[] %zero), window={}, to_apply=%add
  ROOT %t = ((f32[4]{0}, s32[4]{0}), f32[4]{0}, f32[2,4]{1,0}, f32[]) tuple((f32[4]{0},
      s32[4]{0}) %am, f32[4]{0} %total, f32[2,4]{1,0} %rw, f32[] %all)
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
      f32[5,3], f32[2,5,3], f32[5,3], s32[5,3]) {
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
  %unstable = (f32[5,3]{1,0}, s32[5,3]{1,0}) sort(f32[5,3]{1,0} %x, s32[5,3]{1,0} %iota),
      dimensions={1}, to_apply=%less
  %sk = f32[5,3]{1,0} get-tuple-element((f32[5,3]{1,0}, s32[5,3]{1,0}) %sorted), index=0
  %sv = s32[5,3]{1,0} get-tuple-element((f32[5,3]{1,0}, s32[5,3]{1,0}) %unstable), index=1
  ROOT %t = (f32[2,3]{1,0}, f32[5,3]{1,0}, f32[2,5,3]{2,1,0}, f32[5,3]{1,0},
      s32[5,3]{1,0}) tuple(f32[2,3]{1,0} %g, f32[5,3]{1,0} %sc, f32[2,5,3]{2,1,0} %bsc,
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
  %fo = f32[3]{0} fusion(f32[3]{0} %fz, f32[3]{0} %x), kind=kOutput, calls=%fused
  %fc = f32[3]{0} fusion(f32[3]{0} %fo, f32[3]{0} %x), kind=kCustom, calls=%fused
  %nested = (f32[3]{0}, (s32[], f32[3]{0})) tuple(f32[3]{0} %fc, (s32[], f32[3]{0}) %loop)
  %inner = (s32[], f32[3]{0}) get-tuple-element((f32[3]{0}, (s32[], f32[3]{0})) %nested), index=1
  ROOT %t = (f32[3]{0}, f32[3]{0}, f32[3]{0}, f32[3]{0}, (s32[], f32[3]{0})) tuple(f32[3]{0} %c2,
      f32[3]{0} %cn, f32[3]{0} %called, f32[3]{0} %fz, (s32[], f32[3]{0}) %inner)
}
`,
  dynamic: `
HloModule dynamic

ENTRY %main (x: f32[<=16,8], n: s32[]) -> (f32[<=16,8], s32[], f32[<=4,<=8]) {
  %x = f32[<=16,8]{1,0} parameter(0)
  %n = s32[] parameter(1)
  %size = s32[] get-dimension-size(f32[<=16,8]{1,0} %x), dimensions={0}
  %e = f32[<=16,8]{1,0} exponential(f32[<=16,8]{1,0} %x)
  %small = f32[<=4,8]{1,0} slice(f32[<=16,8]{1,0} %e), slice={[0:4], [0:8]}
  %zero = f32[] constant(0)
  %static = f32[4,8]{1,0} broadcast(f32[] %zero), dimensions={}
  %dyn = f32[<=4,8]{1,0} set-dimension-size(f32[<=4,8]{1,0} %small, s32[] %n), dimensions={0}
  %dyn1 = f32[<=4,8]{1,0} set-dimension-size(f32[4,8]{1,0} %static, s32[] %n), dimensions={0}
  %dyn2 = f32[<=4,<=8]{0,1} set-dimension-size(f32[<=4,8]{1,0} %dyn, s32[] %n), dimensions={1}
  ROOT %t = (f32[<=16,8]{1,0}, s32[], f32[<=4,<=8]{0,1}) tuple(f32[<=16,8]{1,0} %e, s32[] %size,
      f32[<=4,<=8]{0,1} %dyn2)
}
`,
  custom: `
HloModule custom_call

ENTRY %main (x: f32[2,2]) -> (f32[2,2], s32[]) {
  %x = f32[2,2]{0,1} parameter(0), metadata={op_type="input" op_name="model/x"}
  %cc = (f32[2,2]{1,0}, s32[]) custom-call(f32[2,2]{0,1} %x), custom_call_target="my_op",
      backend_config="{\\"k\\": 1}\\n\\ttab ünïcode",
      metadata={op_type="myOp" op_name="model/\\"quoted\\"/op" source_file="dir\\\\file.ts"
      source_line=12 source_column=5}
  %nullary = s32[] custom-call(), custom_call_target="tick", metadata={op_name="" source_line=0}
  %a = f32[2,2]{1,0} get-tuple-element((f32[2,2]{1,0}, s32[]) %cc), index=0
  %b = s32[] add(s32[] %nullary, s32[] %nullary), backend_config="{}"
  ROOT %t = (f32[2,2]{1,0}, s32[]) tuple(f32[2,2]{1,0} %a, s32[] %b), metadata={source_line=3}
}
`,
  constants: `
HloModule constants

ENTRY %main () -> (f32[6], f16[5], bf16[4], s32[2,2], s64[3], u8[3], pred[2,2], f32[2,1,3], f32[0],
      f32[2,0], pred[], s64[], f32[2,2]) {
  %f = f32[6]{0} constant({1.5, -0, inf, -inf, nan, 0.1})
  %h = f16[5]{0} constant({0.1, 65504, 6e-08, -2.5, -inf})
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
  %hs = f16[] constant(-0)
  %bs = bf16[] constant(nan)
  %is = s32[] constant(-7)
  %us = u8[] constant(7)
  %cm = f32[2,2]{0,1} constant({ { 1, 2 }, { 3, 4 } })
  ROOT %tuple = (f32[6]{0}, f16[5]{0}, bf16[4]{0}, s32[2,2]{1,0}, s64[3]{0}, u8[3]{0},
      pred[2,2]{1,0}, f32[2,1,3]{2,1,0}, f32[0]{0}, f32[2,0]{1,0}, pred[], s64[],
      f32[2,2]{0,1}) tuple(f32[6]{0} %f, f16[5]{0} %h, bf16[4]{0} %bf, s32[2,2]{1,0} %i,
      s64[3]{0} %l, u8[3]{0} %u, pred[2,2]{1,0} %p, f32[2,1,3]{2,1,0} %r3, f32[0]{0} %empty,
      f32[2,0]{1,0} %empty2, pred[] %t, s64[] %big, f32[2,2]{0,1} %cm)
}
`,
  // The integer types XLA has beyond s32, s64 and u8, and f64: each one's extremes, a column-major
  // u16 (its data reordered on the way in), and arithmetic over them.
  xla_types: `
HloModule xla_types

ENTRY %main (p: u32[3]) -> (s4[4], s8[3], s16[3], u4[3], u16[2,2], u32[3], u64[3], f64[3], u32[3]) {
  %s4 = s4[4]{0} constant({-8, -1, 0, 7})
  %s8 = s8[3]{0} constant({-128, 0, 127})
  %s16 = s16[3]{0} constant({-32768, 1, 32767})
  %u4 = u4[3]{0} constant({0, 9, 15})
  %u16 = u16[2,2]{0,1} constant({ { 0, 65535 }, { 32768, 7 } })
  %u32 = u32[3]{0} constant({0, 2147483648, 4294967295})
  %u64 = u64[3]{0} constant({0, 9223372036854775808, 18446744073709551615})
  %f64 = f64[3]{0} constant({0.1, -1e+300, 5e-324})
  %p = u32[3]{0} parameter(0)
  %sum = u32[3]{0} add(u32[3]{0} %p, u32[3]{0} %u32)
  ROOT %tuple = (s4[4]{0}, s8[3]{0}, s16[3]{0}, u4[3]{0}, u16[2,2]{0,1}, u32[3]{0}, u64[3]{0},
      f64[3]{0}, u32[3]{0}) tuple(s4[4]{0} %s4, s8[3]{0} %s8, s16[3]{0} %s16, u4[3]{0} %u4,
      u16[2,2]{0,1} %u16, u32[3]{0} %u32, u64[3]{0} %u64, f64[3]{0} %f64, u32[3]{0} %sum)
}
`,
  // XLA's sharding (every structured form) and frontend attributes, kept through the proto.
  sharding: `
HloModule sharding

ENTRY %main (p: f32[4,4]) -> (f32[4,4], f32[4,4], f32[4,4], f32[4,4], f32[4,4], f32[4,4]) {
  %p = f32[4,4]{1,0} parameter(0), sharding={devices=[2,2]0,1,2,3}
  %a = f32[4,4]{1,0} negate(f32[4,4]{1,0} %p), sharding={replicated}
  %b = f32[4,4]{1,0} negate(f32[4,4]{1,0} %a), sharding={maximal device=3}
  %c = f32[4,4]{1,0} negate(f32[4,4]{1,0} %b), sharding={devices=[2,2]<=[2,2]T(1,0)}
  %d = f32[4,4]{1,0} negate(f32[4,4]{1,0} %c), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  %e = f32[4,4]{1,0} negate(f32[4,4]{1,0} %d), sharding={devices=[2,2,2]<=[8] last_tile_dims={manual}}
  %f = f32[4,4]{1,0} negate(f32[4,4]{1,0} %e), sharding={manual}, frontend_attributes={_xla_x="1",attr={n = 1 : i32}}
  ROOT %t = (f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0})
      tuple(%a, %b, %c, %d, %e, %f), sharding={{replicated}, {maximal device=1}, {unknown}, {manual}, {replicated}, {replicated}}
}
`,
};

/** Every attribute of Attributes; a key missing here is a compile error. */
const ATTRIBUTE_KEYS = Object.keys({
  parameterNumber: 0,
  literal: 0,
  iotaDimension: 0,
  dimensions: 0,
  direction: 0,
  comparisonType: 0,
  slice: 0,
  dynamicSliceSizes: 0,
  padding: 0,
  dot: 0,
  window: 0,
  convDims: 0,
  featureGroupCount: 0,
  batchGroupCount: 0,
  gather: 0,
  gatherSliceSizes: 0,
  scatter: 0,
  indicesAreSorted: 0,
  uniqueIndices: 0,
  isStable: 0,
  tupleIndex: 0,
  fusionKind: 0,
  customCallTarget: 0,
  customCallHasSideEffect: 0,
  apiVersion: 0,
  operandLayoutConstraints: 0,
  outputToOperandAliasing: 0,
  dotAlgorithm: 0,
  isComposite: 0,
  asyncExecutionThread: 0,
  controlPredecessors: 0,
  replicaGroups: 0,
  channelId: 0,
  useGlobalDeviceIds: 0,
  constrainLayout: 0,
  sourceTargetPairs: 0,
  isHostTransfer: 0,
  infeedConfig: 0,
  outfeedConfig: 0,
  outfeedShape: 0,
  exponentBits: 0,
  mantissaBits: 0,
  rngDistribution: 0,
  rngAlgorithm: 0,
  crossProgramPrefetchIndex: 0,
  lhsRaggedDims: 0,
  rhsGroupDims: 0,
  numCarries: 0,
  isReverse: 0,
  isAssociative: 0,
  backendConfig: 0,
  sharding: 0,
  frontendAttributes: 0,
} satisfies { [K in keyof Required<Attributes>]: 0 });

function protoRoundTrip(m: Module): Module {
  return moduleFromProto(moduleToProto(m));
}

/**
 * `m` as the proto round trip gives it back: a constant's default layout (which the writer always
 * writes, as XLA's loader requires) reads back as no layout, which means the same in Kiln and XLA.
 */
function constantLayoutsDropped(m: Module): Module {
  const c = cloneModule(m);
  for (const i of c.allInstructions()) {
    const s = i.shape;
    if (i.opcode !== "constant" || s.kind !== "array" || !s.layout) continue;
    if (!s.layout.every((d, k) => d === s.layout!.length - 1 - k)) continue;
    const { layout: _dropped, ...rest } = s;
    i.shape = rest;
  }
  return c;
}

/** Every constant of `a` is bit-identical to the constant of the same name in `b`. */
function expectSameConstants(a: Module, b: Module): void {
  const byName = new Map([...b.allInstructions()].map((i) => [i.name, i]));
  for (const i of a.allInstructions()) {
    if (i.opcode !== "constant") continue;
    const other = byName.get(i.name)!.attrs.literal!;
    expect(literalsIdentical(i.attrs.literal!, other), i.name).toBe(true);
  }
}

describe("moduleToProto → moduleFromProto prints the same HLO", () => {
  for (const [name, text] of Object.entries(CORPUS)) {
    it(`corpus module '${name}'`, () => {
      const m = parseHlo(text);
      verifyModule(m);
      const back = protoRoundTrip(m);
      const expected = printHlo(constantLayoutsDropped(m));
      expect(printHlo(back)).toBe(expected);
      verifyModule(back);
      expect(back.name).toBe(m.name);
      expect(back.entry.name).toBe(m.entry.name);
      expectSameConstants(m, back);
      // Reading back and writing again gives a module that prints the same once more.
      expect(printHlo(protoRoundTrip(back))).toBe(expected);
    });
  }

  it("the corpus covers every opcode, every attribute and every element type", () => {
    const ops = new Set<string>();
    const attrs = new Set<string>();
    const types = new Set<string>();
    for (const text of Object.values(CORPUS)) {
      for (const i of parseHlo(text).allInstructions()) {
        ops.add(i.opcode);
        for (const [k, v] of Object.entries(i.attrs)) if (v !== undefined) attrs.add(k);
        if (i.attrs.literal) types.add(i.attrs.literal.type);
      }
    }
    expect(OPCODES.filter((op) => !ops.has(op))).toEqual([]);
    expect(ATTRIBUTE_KEYS.filter((k) => !attrs.has(k))).toEqual([]);
    // A token has no literal: token[] is covered by after-all in the movement module.
    expect(ELEMENT_TYPES.filter((t) => t !== "token" && !types.has(t))).toEqual([]);
  });

  it("keeps instruction names, computation names, metadata, layouts and dynamic dims", () => {
    const m = parseHlo(CORPUS.custom!);
    const back = protoRoundTrip(m);
    const x = back.entry.instructions.find((i) => i.name === "x")!;
    expect(x.shape).toEqual(arrayShape("f32", [2, 2], undefined, [0, 1]));
    expect(x.metadata).toEqual({ opType: "input", opName: "model/x" });
    const cc = back.entry.instructions.find((i) => i.name === "cc")!;
    expect(cc.metadata).toEqual({
      opType: "myOp",
      opName: 'model/"quoted"/op',
      sourceFile: "dir\\file.ts",
      sourceLine: 12,
      sourceColumn: 5,
    });
    expect(cc.attrs.backendConfig).toBe('{"k": 1}\n\ttab ünïcode');
    // Explicitly empty / zero metadata fields are kept (OpMetadata's fields are `optional`).
    const nullary = back.entry.instructions.find((i) => i.name === "nullary")!;
    expect(nullary.metadata).toEqual({ opName: "", sourceLine: 0 });

    const d = protoRoundTrip(parseHlo(CORPUS.dynamic!));
    expect(d.entry.root.shape).toEqual(
      tupleShape([
        arrayShape("f32", ["<=16", 8], undefined, [1, 0]),
        scalarShape("s32"),
        arrayShape("f32", ["<=4", "<=8"], undefined, [0, 1]),
      ]),
    );
  });

  it("keeps the while's condition and body and the conditional's branch order", () => {
    const back = protoRoundTrip(parseHlo(CORPUS.control!));
    const find = (n: string) => back.entry.instructions.find((i) => i.name === n)!;
    expect(find("loop").called.map((c) => c.name)).toEqual(["cond", "body"]);
    expect(find("c2").called.map((c) => c.name)).toEqual(["on_true", "on_false"]);
    expect(find("cn").called.map((c) => c.name)).toEqual(["on_true", "on_false", "branch2"]);
    expect(find("fz").attrs.fusionKind).toBe("kInput");
    expect(back.entry.root.name).toBe("t");
  });

  it("round-trips a module built by hand: entry added first, list out of order, early ROOT", () => {
    const m = new Module("built");
    const main = m.addComputation("main");
    const red = m.addComputation("red");
    m.entry = main;
    const a = red.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 0 },
    });
    const b = red.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 1 },
    });
    red.addInstruction({ opcode: "maximum", shape: scalarShape("f32"), operands: [a, b] });
    const p = main.addInstruction({
      opcode: "parameter",
      shape: arrayShape("f32", ["<=8", 3]),
      attrs: { parameterNumber: 0 },
      metadata: { opType: "input", sourceFile: "model.ts", sourceLine: 7, sourceColumn: 3 },
    });
    const init = main.addInstruction({
      opcode: "constant",
      shape: scalarShape("f32"),
      attrs: { literal: literal("f32", [], [-Infinity]) },
    });
    const r = main.addInstruction({
      opcode: "reduce",
      shape: arrayShape("f32", [3]),
      operands: [p, init],
      attrs: { dimensions: [0] },
      called: [red],
    });
    const neg = main.addInstruction({ opcode: "negate", shape: r.shape, operands: [r] });
    // The negation comes first in the list and the reduce is the ROOT, not the last.
    main.setOrder([p, init, neg, r].sort((x, y) => (x === neg ? -1 : y === neg ? 1 : 0)));
    main.root = r;
    const back = protoRoundTrip(m);
    expect(printHlo(back)).toBe(printHlo(m));
    // Written in the printer's (topological) order, the module read back verifies.
    verifyModule(back);
    expect(back.entry.root.opcode).toBe("reduce");
    expect(back.computations.map((c) => c.name)).toEqual(["red", "main"]);
  });
});

describe("the bytes carry XLA's schema", () => {
  it("uses XLA's field numbers and PrimitiveType values", () => {
    // From openxla/xla xla/service/hlo.proto and xla/xla_data.proto.
    type Fields = { fields: readonly { name: string; number: number }[] };
    const num = (schema: Fields, name: string) =>
      schema.fields.find((f) => f.name === name)?.number;
    const expected: [Fields, Record<string, number>][] = [
      [
        HloModuleProtoSchema,
        {
          name: 1,
          entry_computation_name: 2,
          computations: 3,
          host_program_shape: 4,
          id: 5,
          entry_computation_id: 6,
        },
      ],
      [
        HloComputationProtoSchema,
        {
          name: 1,
          instructions: 2,
          program_shape: 4,
          id: 5,
          root_id: 6,
          is_fusion_computation: 7,
        },
      ],
      [
        HloInstructionProtoSchema,
        {
          name: 1,
          opcode: 2,
          shape: 3,
          metadata: 7,
          literal: 8,
          parameter_number: 9,
          fusion_kind: 11,
          tuple_index: 13,
          dimensions: 14,
          window: 15,
          convolution_dimension_numbers: 16,
          slice_dimensions: 17,
          dynamic_slice_sizes: 20,
          padding_config: 21,
          custom_call_target: 28,
          dot_dimension_numbers: 30,
          gather_dimension_numbers: 33,
          gather_slice_sizes: 34,
          id: 35,
          operand_ids: 36,
          called_computation_ids: 38,
          backend_config: 43,
          sharding: 40,
          frontend_attributes: 68,
          scatter_dimension_numbers: 48,
          feature_group_count: 50,
          batch_group_count: 58,
          is_stable: 60,
          comparison_direction: 63,
          indices_are_sorted: 67,
          unique_indices: 69,
          comparison_type: 72,
          channel_id: 26,
          replica_groups: 49,
          use_global_device_ids: 71,
          constrain_layout: 56,
          source_target_pairs: 52,
          collective_device_list: 87,
          iota_collective_device_list: 92,
          custom_call_has_side_effect: 65,
          custom_call_api_version: 77,
          operand_shapes_with_layout: 57,
          output_operand_aliasing: 74,
          precision_config: 51,
          is_composite: 89,
          async_execution_thread: 79,
          control_predecessor_ids: 37,
          exponent_bits: 18,
          mantissa_bits: 19,
          outfeed_config: 22,
          distribution: 23,
          infeed_config: 27,
          outfeed_shape: 29,
          is_host_transfer: 47,
          rng_algorithm: 70,
          cross_program_prefetch_index: 80,
          ragged_dot_dimension_numbers: 90,
          is_reverse: 94,
          num_carries: 95,
          is_associative: 96,
        },
      ],
      [PrecisionConfigSchema, { operand_precision: 1, algorithm: 2 }],
      [
        OutputOperandAliasingSchema,
        { output_shape_index: 1, operand_index: 2, operand_shape_index: 3 },
      ],
      [ReplicaGroupSchema, { replica_ids: 1 }],
      [CollectiveDeviceListProtoSchema, { replica_groups: 1 }],
      [
        IotaReplicaGroupListProtoSchema,
        {
          num_replica_groups: 1,
          num_devices_per_group: 2,
          iota_reshape_dims: 3,
          iota_transpose_perm: 4,
        },
      ],
      [SourceTargetSchema, { source: 1, target: 2 }],
      [HloInstructionProto_SliceDimensionsSchema, { start: 1, limit: 2, stride: 3 }],
      [
        ShapeProtoSchema,
        { element_type: 2, dimensions: 3, tuple_shapes: 4, layout: 5, is_dynamic_dimension: 6 },
      ],
      [
        LayoutProtoSchema,
        { minor_to_major: 1, tiles: 6, element_size_in_bits: 7, memory_space: 8 },
      ],
      [TileProtoSchema, { dimensions: 1 }],
      [
        OpShardingSchema,
        {
          type: 1,
          tile_assignment_dimensions: 3,
          tile_assignment_devices: 4,
          tuple_shardings: 5,
          replicate_on_last_tile_dim: 6,
          last_tile_dims: 8,
          iota_reshape_dims: 9,
          iota_transpose_perm: 10,
          metadata: 7,
        },
      ],
      [FrontendAttributesSchema, { map: 1 }],
      [ProgramShapeProtoSchema, { parameters: 1, result: 2, parameter_names: 3 }],
      [
        OpMetadataSchema,
        { op_type: 1, op_name: 2, source_file: 3, source_line: 4, source_column: 18 },
      ],
      [
        LiteralProtoSchema,
        {
          shape: 1,
          preds: 2,
          u8s: 3,
          s32s: 4,
          s64s: 5,
          u32s: 6,
          u64s: 7,
          f32s: 8,
          f64s: 9,
          tuple_literals: 10,
          f16s: 11,
          bf16s: 13,
          s8s: 15,
          u16s: 16,
          s16s: 17,
          s4s: 21,
          u4s: 22,
          f8e5m2s: 19,
          f8e4m3s: 28,
          f8e3m4s: 29,
          f8e4m3fns: 20,
          f8e4m3fnuzs: 25,
          f8e5m2fnuzs: 24,
          f8e4m3b11fnuzs: 23,
        },
      ],
      [PaddingConfigSchema, { dimensions: 1 }],
      [
        PaddingConfig_PaddingConfigDimensionSchema,
        { edge_padding_low: 1, edge_padding_high: 2, interior_padding: 3 },
      ],
      [WindowSchema, { dimensions: 1 }],
      [
        WindowDimensionSchema,
        {
          size: 1,
          stride: 2,
          padding_low: 3,
          padding_high: 4,
          window_dilation: 5,
          base_dilation: 6,
          window_reversal: 7,
        },
      ],
      [
        DotDimensionNumbersSchema,
        {
          lhs_contracting_dimensions: 1,
          rhs_contracting_dimensions: 2,
          lhs_batch_dimensions: 3,
          rhs_batch_dimensions: 4,
        },
      ],
      [
        ConvolutionDimensionNumbersSchema,
        {
          kernel_input_feature_dimension: 3,
          kernel_output_feature_dimension: 4,
          kernel_spatial_dimensions: 6,
          input_batch_dimension: 7,
          input_feature_dimension: 8,
          output_batch_dimension: 9,
          output_feature_dimension: 10,
          input_spatial_dimensions: 11,
          output_spatial_dimensions: 12,
        },
      ],
      [
        GatherDimensionNumbersSchema,
        {
          offset_dims: 1,
          collapsed_slice_dims: 2,
          start_index_map: 3,
          index_vector_dim: 4,
          operand_batching_dims: 5,
          start_indices_batching_dims: 6,
        },
      ],
      [
        ScatterDimensionNumbersSchema,
        {
          update_window_dims: 1,
          inserted_window_dims: 2,
          scatter_dims_to_operand_dims: 3,
          index_vector_dim: 4,
          input_batching_dims: 5,
          scatter_indices_batching_dims: 6,
        },
      ],
    ];
    for (const [schema, fields] of expected) {
      for (const [name, n] of Object.entries(fields)) {
        expect([name, num(schema, name)]).toEqual([name, n]);
      }
      expect(schema.fields.length).toBe(Object.keys(fields).length);
    }
    const values = Object.fromEntries(PrimitiveTypeSchema.values.map((v) => [v.name, v.number]));
    expect(values).toMatchObject({
      PRIMITIVE_TYPE_INVALID: 0,
      PRED: 1,
      S4: 21,
      S8: 2,
      S16: 3,
      U4: 22,
      U16: 7,
      U32: 8,
      U64: 9,
      S32: 4,
      S64: 5,
      U8: 6,
      F16: 10,
      F32: 11,
      TUPLE: 13,
      BF16: 16,
      F64: 12,
    });
  });

  it("writes XLA's opcode names, element types, dims, ids and attribute fields", () => {
    const m = parseHlo(CORPUS.control!);
    const msg = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    expect(msg.name).toBe("control");
    const comps = new Map(msg.computations.map((c) => [c.name, c]));
    // Callees before callers; the entry last.
    expect(msg.computations.at(-1)!.name).toBe("main");
    expect(msg.entryComputationName).toBe("main");
    expect(msg.entryComputationId).toBe(comps.get("main")!.id);
    const ids = new Set(msg.computations.map((c) => c.id));
    expect(ids.size).toBe(msg.computations.length);

    const main = comps.get("main")!;
    const byName = new Map(main.instructions.map((i) => [i.name, i]));
    const loop = byName.get("loop")!;
    expect(loop.opcode).toBe("while");
    // XLA: called_computations = [body, condition].
    expect(loop.calledComputationIds).toEqual([comps.get("body")!.id, comps.get("cond")!.id]);
    expect(loop.operandIds).toEqual([byName.get("init")!.id]);
    expect(loop.shape!.elementType).toBe(PrimitiveType.TUPLE);
    expect(loop.shape!.tupleShapes.map((s) => s.elementType)).toEqual([4, 11]);
    expect(loop.shape!.tupleShapes[1]!.dimensions).toEqual([3n]);
    expect(byName.get("fz")!.fusionKind).toBe("kInput");
    expect(comps.get("fused")!.isFusionComputation).toBe(true);
    expect(comps.get("body")!.isFusionComputation).toBe(false);
    expect(main.rootId).toBe(byName.get("t")!.id);
    expect(byName.get("p")!.parameterNumber).toBe(1n);
    expect(byName.get("p")!.shape!.elementType).toBe(PrimitiveType.PRED);

    const cond = new Map(comps.get("cond")!.instructions.map((i) => [i.name, i]));
    expect(cond.get("lt")!.comparisonDirection).toBe("LT");
    expect(cond.get("i")!.opcode).toBe("get-tuple-element");
    expect(cond.get("i")!.tupleIndex).toBe(0n);
    expect(comps.get("cond")!.programShape!.parameterNames).toEqual(["s"]);
    expect(comps.get("cond")!.programShape!.result!.elementType).toBe(PrimitiveType.PRED);
    expect(msg.hostProgramShape!.parameters.map((s) => s.elementType)).toEqual([11, 1, 4]);

    // Instruction ids are unique across the whole module.
    const all = msg.computations.flatMap((c) => c.instructions.map((i) => i.id));
    expect(new Set(all).size).toBe(all.length);
  });

  it("writes shapes, layouts, literals and attributes in XLA's fields", () => {
    const m = parseHlo(`HloModule fields

ENTRY %main (x: f32[<=16,8], s: s32[]) -> f32[2,3] {
  %x = f32[<=16,8]{0,1} parameter(0), metadata={op_type="input" source_file="m.ts"
      source_line=4 source_column=9}
  %s = s32[] parameter(1)
  %h = f16[2]{0} constant({1, -2})
  %bf = bf16[2]{0} constant({1, -2})
  %l = s64[2]{0} constant({-1, 9223372036854775807})
  %u = u8[2]{0} constant({1, 255})
  %p = pred[2]{0} constant({true, false})
  %iota = s32[4,6]{1,0} iota(), iota_dimension=1
  %ds = f32[2,3]{1,0} dynamic-slice(f32[<=16,8]{0,1} %x, s32[] %s, s32[] %s),
      dynamic_slice_sizes={2,3}
  %sl = f32[1,3]{1,0} slice(f32[2,3]{1,0} %ds), slice={[1:2], [0:3:2]}
  %z = f32[] constant(0)
  %pad = f32[2,3]{1,0} pad(f32[1,3]{1,0} %sl, f32[] %z), padding=1_0x-1_1_1
  ROOT %dot = f32[2,3]{1,0} dot(f32[2,3]{1,0} %pad, f32[2,3]{1,0} %ds), lhs_batch_dims={0},
      rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1},
      backend_config="cfg"
}
`);
    const msg = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    const by = new Map(msg.computations[0]!.instructions.map((i) => [i.name, i]));
    const x = by.get("x")!;
    expect(x.shape!.elementType).toBe(PrimitiveType.F32);
    expect(x.shape!.dimensions).toEqual([16n, 8n]);
    expect(x.shape!.isDynamicDimension).toEqual([true, false]);
    expect(x.shape!.layout!.minorToMajor).toEqual([0n, 1n]);
    expect(x.metadata).toMatchObject({
      opType: "input",
      sourceFile: "m.ts",
      sourceLine: 4,
      sourceColumn: 9,
    });
    expect(x.metadata!.opName).toBeUndefined();
    // f16 1 = 0x3c00, -2 = 0xc000; bf16 1 = 0x3f80, -2 = 0xc000; little-endian.
    expect(Array.from(by.get("h")!.literal!.f16s)).toEqual([0x00, 0x3c, 0x00, 0xc0]);
    expect(Array.from(by.get("bf")!.literal!.bf16s)).toEqual([0x80, 0x3f, 0x00, 0xc0]);
    expect(by.get("h")!.literal!.shape!.elementType).toBe(PrimitiveType.F16);
    expect(by.get("bf")!.literal!.shape!.elementType).toBe(PrimitiveType.BF16);
    expect(by.get("l")!.literal!.s64s).toEqual([-1n, 9223372036854775807n]);
    expect(Array.from(by.get("u")!.literal!.u8s)).toEqual([1, 255]);
    expect(by.get("p")!.literal!.preds).toEqual([true, false]);
    // Literals carry XLA's default layout (XLA rejects a LiteralProto without one).
    expect(by.get("h")!.literal!.shape!.layout!.minorToMajor).toEqual([0n]);
    expect(by.get("iota")!.dimensions).toEqual([1n]);
    expect(by.get("ds")!.dynamicSliceSizes).toEqual([2n, 3n]);
    expect(by.get("ds")!.opcode).toBe("dynamic-slice");
    expect(
      by.get("sl")!.sliceDimensions.map((d) => [d.start, d.limit, d.stride]),
    ).toEqual([
      [1n, 2n, 1n],
      [0n, 3n, 2n],
    ]);
    expect(
      by
        .get("pad")!
        .paddingConfig!.dimensions.map((d) => [
          d.edgePaddingLow,
          d.edgePaddingHigh,
          d.interiorPadding,
        ]),
    ).toEqual([
      [1n, 0n, 0n],
      [-1n, 1n, 1n],
    ]);
    const dot = by.get("dot")!;
    expect(dot.dotDimensionNumbers).toMatchObject({
      lhsBatchDimensions: [0n],
      rhsBatchDimensions: [0n],
      lhsContractingDimensions: [1n],
      rhsContractingDimensions: [1n],
    });
    expect(new TextDecoder().decode(dot.backendConfig)).toBe("cfg");
  });

  it("gives a constant the layout of its literal, as XLA's loader requires", () => {
    // HloInstruction::CreateFromProto RET_CHECKs Shape::Equal().MinorToMajorOnlyInLayout() of the
    // instruction's shape and its literal's; a LiteralProto always carries a layout.
    const m = parseHlo(`HloModule c

ENTRY %main () -> (f32[2,3], s32[]) {
  %c = f32[2,3] constant({ { 1, 2, 3 }, { 4, 5, 6 } })
  %s = s32[] constant(7)
  ROOT %t = (f32[2,3], s32[]) tuple(%c, %s)
}
`);
    const msg = moduleToMessage(m);
    for (const name of ["c", "s"]) {
      const i = msg.computations[0]!.instructions.find((x) => x.name === name)!;
      expect(i.shape!.layout).toBeDefined();
      expect(i.shape!.layout!.minorToMajor).toEqual(i.literal!.shape!.layout!.minorToMajor);
    }
    const c = msg.computations[0]!.instructions.find((x) => x.name === "c")!;
    expect(c.shape!.layout!.minorToMajor).toEqual([1n, 0n]);
    // Nothing else gains a layout, and the module reads back as written.
    const t = msg.computations[0]!.instructions.find((x) => x.name === "t")!;
    expect(t.shape!.tupleShapes.every((e) => e.layout === undefined)).toBe(true);
    expect(printHlo(moduleFromMessage(msg))).toBe(printHlo(m));
  });

  it("reads XLA's conventions: absent group counts are 1, literals in any layout", () => {
    const m = parseHlo(`HloModule xla

ENTRY %main (img: f32[1,5,5,2], k: f32[3,3,2,2]) -> (f32[1,3,3,2], f32[2,3]) {
  %img = f32[1,5,5,2]{3,2,1,0} parameter(0)
  %k = f32[3,3,2,2]{3,2,1,0} parameter(1)
  %conv = f32[1,3,3,2]{3,2,1,0} convolution(f32[1,5,5,2]{3,2,1,0} %img, f32[3,3,2,2]{3,2,1,0} %k),
      window={size=3x3}, dim_labels=b01f_01io->b01f
  %c = f32[2,3]{1,0} constant({ { 1, 2, 3 }, { 4, 5, 6 } })
  ROOT %t = (f32[1,3,3,2]{3,2,1,0}, f32[2,3]{1,0}) tuple(f32[1,3,3,2]{3,2,1,0} %conv,
      f32[2,3]{1,0} %c)
}
`);
    const msg = moduleToMessage(m);
    const conv = msg.computations[0]!.instructions.find((i) => i.name === "conv")!;
    expect(conv.featureGroupCount).toBe(0n);
    const c = msg.computations[0]!.instructions.find((i) => i.name === "c")!;
    // The same values stored column-major, as XLA writes a literal with layout {0,1}.
    c.literal!.shape!.layout!.minorToMajor = [0n, 1n];
    c.literal!.f32s = [1, 4, 2, 5, 3, 6];
    const back = moduleFromMessage(msg);
    const bconv = back.entry.instructions.find((i) => i.name === "conv")!;
    expect(bconv.attrs.featureGroupCount).toBe(1);
    expect(bconv.attrs.batchGroupCount).toBe(1);
    const bc = back.entry.instructions.find((i) => i.name === "c")!;
    expect(bc.attrs.literal!.toArray()).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(printHlo(back)).toBe(printHlo(constantLayoutsDropped(m)));
  });
});

// ---- malformed input -----------------------------------------------------------------------

const BASE = `HloModule base

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[4]) -> f32[] {
  %x = f32[4]{0} parameter(0)
  %zero = f32[] constant(0)
  %neg = f32[4]{0} negate(f32[4]{0} %x), metadata={op_type="neg"}
  ROOT %sum = f32[] reduce(f32[4]{0} %neg, f32[] %zero), dimensions={0}, to_apply=%add
}
`;

const baseBytes = (): Uint8Array => moduleToProto(parseHlo(BASE));

/** The base module's message after `edit`, encoded. */
function edited(edit: (msg: HloModuleProto) => void): Uint8Array {
  const msg = fromBinary(HloModuleProtoSchema, baseBytes());
  edit(msg);
  return toBinary(HloModuleProtoSchema, msg);
}

function instr(msg: HloModuleProto, name: string): HloInstructionProto {
  for (const c of msg.computations) {
    const i = c.instructions.find((x) => x.name === name);
    if (i) return i;
  }
  throw new Error(`test setup: no instruction '${name}'`);
}

function rejects(bytes: Uint8Array, message: RegExp): void {
  let err: unknown;
  try {
    moduleFromProto(bytes);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ProtoError);
  expect((err as Error).message).toMatch(message);
}

describe("malformed bytes are rejected with a ProtoError", () => {
  it("the base module itself reads back", () => {
    expect(printHlo(moduleFromProto(baseBytes()))).toBe(printHlo(parseHlo(BASE)));
  });

  it("truncated encodings", () => {
    const bytes = baseBytes();
    for (const cut of [1, 2, 7, Math.floor(bytes.length / 4), Math.floor(bytes.length / 2)]) {
      rejects(bytes.subarray(0, cut), /cannot decode HloModuleProto|missing entry/);
    }
    rejects(bytes.subarray(0, Math.floor((bytes.length * 3) / 4)), /cannot decode/);
    rejects(bytes.subarray(0, bytes.length - 1), /cannot decode/);
  });

  it("random and empty bytes", () => {
    rejects(new Uint8Array(0), /no computations \(missing entry\)/);
    rejects(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), /cannot decode/);
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 24) & 0xff;
    for (let k = 0; k < 20; k++) {
      const junk = Uint8Array.from({ length: 64 }, rnd);
      rejects(junk, /HloModuleProto|computation|entry|instruction/);
    }
  });

  it("an operand id that does not exist", () => {
    const bytes = edited((m) => (instr(m, "neg").operandIds = [99999n]));
    rejects(
      bytes,
      /instruction 'neg' .* in computation 'main': operand 0 refers to id 99999, which does not/,
    );
  });

  it("an operand id of another computation", () => {
    const bytes = edited((m) => (instr(m, "neg").operandIds = [instr(m, "a").id]));
    rejects(bytes, /'neg'.*operand 0 .* refers to an instruction of computation 'add'/);
  });

  it("an operand defined after its user", () => {
    const bytes = edited((m) => (instr(m, "neg").operandIds = [instr(m, "sum").id]));
    rejects(bytes, /'neg'.*operand 0 .* is defined after its user/);
  });

  it("an unknown opcode", () => {
    const bytes = edited((m) => (instr(m, "neg").opcode = "frobnicate"));
    rejects(bytes, /instruction 'neg'.*unknown opcode "frobnicate"/);
  });

  it("a literal with the wrong number of elements", () => {
    const bytes = edited((m) => (instr(m, "zero").literal!.f32s = [1, 2]));
    rejects(bytes, /instruction 'zero'.*literal: f32\[\] needs 1 elements in f32s, got 2/);
    const odd = edited((m) => {
      const z = instr(m, "zero");
      z.shape!.elementType = PrimitiveType.F16;
      z.literal!.shape!.elementType = PrimitiveType.F16;
      z.literal!.f16s = new Uint8Array([1, 2, 3]);
    });
    rejects(odd, /'zero'.*f16s has an odd number of bytes \(3\)/);
  });

  it("a literal whose shape differs from the constant's", () => {
    const bytes = edited((m) => {
      const z = instr(m, "zero");
      z.literal!.shape!.dimensions = [2n];
      z.literal!.shape!.isDynamicDimension = [false];
      z.literal!.shape!.layout!.minorToMajor = [0n];
      z.literal!.f32s = [1, 2];
    });
    rejects(bytes, /'zero'.*literal shape f32\[2\] does not match the constant's shape f32\[\]/);
  });

  it("a missing entry computation", () => {
    const bytes = edited((m) => {
      m.entryComputationId = 424242n;
      m.entryComputationName = "nowhere";
    });
    rejects(bytes, /missing entry: no computation has entry_computation_id 424242 or .*'nowhere'/);
  });

  it("a tuple shape where an array is needed", () => {
    const tup = create2Tuple();
    rejects(
      edited((m) => (instr(m, "neg").shape = tup)),
      /'neg'.*negate needs an array shape, got the tuple shape \(f32\[\], f32\[\]\)/,
    );
    rejects(
      edited((m) => (instr(m, "zero").literal!.shape = tup)),
      /'zero'.*literal: a tuple shape .* where an array literal is needed/,
    );
  });

  it("a bad element type", () => {
    rejects(
      edited((m) => (instr(m, "x").shape!.elementType = PrimitiveType.C64)),
      /instruction 'x'.*shape: unsupported element type C64/,
    );
    rejects(
      edited((m) => (instr(m, "x").shape!.elementType = 99 as PrimitiveType)),
      /instruction 'x'.*unsupported element type #99/,
    );
  });

  it("a missing shape", () => {
    rejects(
      edited((m) => (instr(m, "neg").shape = undefined)),
      /instruction 'neg' .* in computation 'main': missing shape/,
    );
  });

  it("bad dimensions, dynamic flags and layouts", () => {
    rejects(
      edited((m) => (instr(m, "x").shape!.dimensions = [-4n])),
      /'x'.*dimension 0 is -4, out of range \(must be >= 0\)/,
    );
    rejects(
      edited((m) => (instr(m, "x").shape!.dimensions = [2n ** 60n])),
      /'x'.*dimension 0 is 1152921504606846976, out of range/,
    );
    rejects(
      edited((m) => (instr(m, "x").shape!.isDynamicDimension = [true, false])),
      /'x'.*1 dimensions but 2 is_dynamic_dimension flags/,
    );
    rejects(
      edited((m) => (instr(m, "x").shape!.layout!.minorToMajor = [1n])),
      /'x'.*layout minor_to_major \{1\} is not a permutation of the 1 dimensions/,
    );
  });

  it("dangling, misplaced or miscounted called computations", () => {
    rejects(
      edited((m) => (instr(m, "sum").calledComputationIds = [777n])),
      /'sum'.*called_computation_ids\[0\] is 777, which is not a computation id/,
    );
    rejects(
      edited((m) => (instr(m, "sum").calledComputationIds = [])),
      /'sum'.*reduce calls exactly one computation, got 0/,
    );
    rejects(
      edited((m) => (instr(m, "neg").calledComputationIds = [m.computations[0]!.id])),
      /'neg'.*negate calls no computation, got 1/,
    );
    // add calls main, main calls add.
    rejects(
      edited((m) => {
        const s = instr(m, "s");
        s.opcode = "call";
        s.calledComputationIds = [m.entryComputationId];
      }),
      /computations call each other in a cycle: (add -> main -> add|main -> add -> main)/,
    );
  });

  it("a wrong operand count, root id, duplicate ids and names", () => {
    rejects(
      edited((m) => instr(m, "neg").operandIds.push(instr(m, "x").id)),
      /'neg'.*negate takes 1 operand\(s\), got 2/,
    );
    rejects(
      edited((m) => (m.computations[1]!.rootId = 31337n)),
      /computation 'main': root_id 31337 is not an instruction id/,
    );
    rejects(
      edited((m) => (m.computations[1]!.rootId = instr(m, "s").id)),
      /computation 'main': root_id .* is an instruction of computation 'add'/,
    );
    rejects(
      edited((m) => (instr(m, "neg").id = instr(m, "x").id)),
      /instruction id \d+ is used twice/,
    );
    rejects(edited((m) => (instr(m, "neg").name = "x")), /two instructions are named 'x'/);
    rejects(edited((m) => (m.computations[0]!.name = "main")), /two computations are named/);
    rejects(edited((m) => (m.computations[0]!.instructions = [])), /'add' has no instructions/);
  });

  it("missing or unknown attribute values", () => {
    rejects(
      edited((m) => (instr(m, "zero").literal = undefined)),
      /instruction 'zero'.*constant has no literal/,
    );
    rejects(
      edited((m) => {
        const n = instr(m, "neg");
        n.opcode = "compare";
        n.operandIds.push(n.operandIds[0]!);
        n.shape!.elementType = PrimitiveType.PRED;
      }),
      /'neg'.*compare has no comparison_direction/,
    );
    rejects(
      edited((m) => (instr(m, "neg").comparisonDirection = "SIDEWAYS")),
      /'neg'.*unknown comparison_direction "SIDEWAYS"/,
    );
    rejects(
      edited((m) => (instr(m, "neg").fusionKind = "kWhatever")),
      /'neg'.*unknown fusion_kind "kWhatever"/,
    );
    rejects(
      edited((m) => (instr(m, "neg").backendConfig = new Uint8Array([0xc3, 0x28]))),
      /'neg'.*backend_config is not valid UTF-8/,
    );
    rejects(
      edited((m) => {
        const n = instr(m, "neg");
        n.opcode = "iota";
        n.operandIds = [];
      }),
      /'neg'.*iota needs its one dimension in 'dimensions', got 0/,
    );
  });

  it("random mutations of a valid encoding decode or throw ProtoError, nothing else", () => {
    const valid = moduleToProto(parseHlo(CORPUS.control!));
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant("set" as const), at: fc.nat(), byte: fc.nat(255) }),
      fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), byte: fc.nat(255) }),
      fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), byte: fc.constant(0) }),
      fc.record({ kind: fc.constant("cut" as const), at: fc.nat(), byte: fc.constant(0) }),
    );
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 6 }), (edits) => {
        let bytes = Array.from(valid);
        for (const e of edits) {
          const at = e.at % (bytes.length + 1);
          if (e.kind === "set" && bytes.length > 0) bytes[at % bytes.length] = e.byte;
          else if (e.kind === "insert") bytes.splice(at, 0, e.byte);
          else if (e.kind === "delete") bytes.splice(at, 1);
          else if (e.kind === "cut") bytes = bytes.slice(0, at);
        }
        try {
          const m = moduleFromProto(Uint8Array.from(bytes));
          // What decodes is a module the printer can print.
          expect(typeof printHlo(m)).toBe("string");
        } catch (e) {
          if (!(e instanceof ProtoError)) throw e;
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("writing a module without an entry is a ProtoError", () => {
    const m = new Module("no_entry");
    m.addComputation("c").addInstruction({ opcode: "constant", shape: scalarShape("s32"),
      attrs: { literal: literal("s32", [], [1]) } });
    expect(() => moduleToProto(m)).toThrow(ProtoError);
    expect(() => moduleToProto(m)).toThrow(/module 'no_entry' has no ENTRY computation/);
  });
});

function create2Tuple() {
  const msg = fromBinary(HloModuleProtoSchema, moduleToProto(parseHlo(`HloModule t

ENTRY %main (a: f32[], b: f32[]) -> (f32[], f32[]) {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %t = (f32[], f32[]) tuple(f32[] %a, f32[] %b)
}
`)));
  return msg.computations[0]!.instructions.find((i) => i.name === "t")!.shape!;
}

describe("decode errors name the message and the byte offset", () => {
  it("a truncated encoding: the field, the message path and where it breaks", () => {
    const bytes = baseBytes();
    rejects(
      bytes.subarray(0, 10),
      new RegExp(
        "^HLO proto: cannot decode HloModuleProto \\(10 bytes\\): at byte 6, in HloModuleProto: " +
          "field entry_computation_name is \\d+ bytes long but only 2 remain \\(premature EOF\\)$",
      ),
    );
    rejects(bytes.subarray(0, bytes.length - 1), /at byte \d+, in HloModuleProto: field \w+/);
  });

  it("an illegal tag deep inside: the nested message and its path", () => {
    // A tag with field number 0 just inside the first instruction of the second computation.
    const msg = fromBinary(HloModuleProtoSchema, baseBytes());
    const name = msg.computations[1]!.instructions[0]!.name;
    const bytes = moduleToProto(parseHlo(BASE));
    const at = indexOfName(bytes, name);
    // The name's tag (field 1, wire type 2) is two bytes before its text: make it field 0.
    const bad = bytes.slice();
    bad[at - 2] = 0x02;
    rejects(
      bad,
      new RegExp(
        `at byte ${at - 2}, in HloInstructionProto \\(computations\\[1\\]\\.instructions\\[0\\]\\): ` +
          "illegal tag: field no 0 wire type 2",
      ),
    );
  });

  it("a string that is not UTF-8, and a length past the end of its message", () => {
    const bytes = baseBytes();
    const at = indexOfName(bytes, "neg");
    const bad = bytes.slice();
    bad[at] = 0xff;
    rejects(
      bad,
      new RegExp(
        `at byte ${at - 2}, in HloInstructionProto \\(computations\\[1\\]\\.instructions\\[2\\]\\): ` +
          "field name is not valid UTF-8",
      ),
    );
    const long = bytes.slice();
    long[at - 1] = 0x7f; // the name's length: past the instruction's end
    rejects(
      long,
      /in HloInstructionProto \(computations\[1\]\.instructions\[2\]\): field name is 127 bytes long but only \d+ remain/,
    );
  });

  it("every located: 2000 random byte mutations of valid modules say where they break", () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    let undecodable = 0;
    for (const text of [BASE, ...Object.values(CORPUS)]) {
      const bytes = moduleToProto(parseHlo(text));
      for (let k = 0; k < 2000 / (Object.keys(CORPUS).length + 1); k++) {
        const bad = bytes.slice();
        for (let j = 0; j < 3; j++) bad[Math.floor(rnd() * bad.length)] = Math.floor(rnd() * 256);
        try {
          moduleFromProto(bad);
        } catch (e) {
          expect(e).toBeInstanceOf(ProtoError);
          const m = (e as Error).message;
          if (!m.includes("cannot decode")) continue;
          undecodable++;
          if (!/: at byte \d+, in \w+/.test(m)) throw new Error(m);
        }
      }
    }
    expect(undecodable).toBeGreaterThan(100);
  });
});

/** The offset of the first occurrence of `name`'s UTF-8 bytes in `bytes`. */
function indexOfName(bytes: Uint8Array, name: string): number {
  const needle = new TextEncoder().encode(name);
  for (let i = 0; i + needle.length <= bytes.length; i++) {
    if (needle.every((b, j) => bytes[i + j] === b)) return i;
  }
  throw new Error(`test setup: '${name}' is not in the bytes`);
}

describe("tuple nesting: one limit for the parser, builder, verifier and both proto directions", () => {
  const nested = (d: number): string => {
    let s = "f32[2]{0}";
    for (let k = 0; k < d; k++) s = `(${s})`;
    return s;
  };
  const moduleText = (d: number) =>
    `HloModule deep\n\nENTRY %main (p: ${nested(d)}) -> ${nested(d)} {\n` +
    `  ROOT %p = ${nested(d)} parameter(0)\n}\n`;
  const deepShape = (d: number) => parseShape(nested(Math.min(d, 200))) as Shape;
  const wrap = (s: Shape, n: number) => {
    for (let k = 0; k < n; k++) s = tupleShape([s]);
    return s;
  };

  it(`MAX_TUPLE_DEPTH is ${MAX_TUPLE_DEPTH} and the decoder's limit covers it`, () => {
    expect(MAX_TUPLE_DEPTH).toBe(200);
    expect(PROTO_RECURSION_LIMIT).toBe(MAX_TUPLE_DEPTH + 5);
  });

  for (const d of [97, 100, 200]) {
    it(`${d} deep: parses, verifies, and survives moduleToProto → moduleFromProto`, () => {
      const m = parseHlo(moduleText(d));
      verifyModule(m);
      const back = moduleFromProto(moduleToProto(m));
      verifyModule(back);
      expect(printHlo(back)).toBe(printHlo(m));
      expect(tupleDepth(back.entry.root.shape)).toBe(d);
    });
  }

  it("201 deep: the parser names the limit", () => {
    expect(() => parseHlo(moduleText(201))).toThrow(
      /expected a shape, got tuples nested deeper than 200 \(the limit on tuple nesting\)/,
    );
    expect(() => parseShape(nested(201))).toThrow(/nested deeper than 200/);
  });

  it("201 deep: the builder names the limit, for a parameter and for a tuple op", () => {
    const mb = new ModuleBuilder("deep");
    expect(() => mb.entry("main", (b) => b.parameter(wrap(deepShape(200), 1)))).toThrow(
      /parameter\(\): its shape nests tuples deeper than 200 \(the limit on nesting\)/,
    );
    const mb2 = new ModuleBuilder("deep2");
    expect(() => mb2.entry("main", (b) => b.tuple([b.parameter(deepShape(200))]))).toThrow(
      /tuple\(.*\): its shape nests tuples deeper than 200/,
    );
  });

  it("201 deep, built by hand: the verifier and moduleToProto name the limit", () => {
    // Thousands deep: the checks must not overflow the stack either.
    for (const n of [1, 5000]) {
      const m = new Module("deep");
      const c = m.addComputation("main");
      m.entry = c;
      c.addInstruction({
        opcode: "parameter",
        shape: wrap(deepShape(200), n),
        operands: [],
        attrs: { parameterNumber: 0 },
        called: [],
      });
      expect(() => verifyModule(m)).toThrow(
        /verifier: %\S+ in main: its shape nests tuples deeper than 200 \(the limit on nesting\)/,
      );
      expect(() => moduleToProto(m)).toThrow(ProtoError);
      expect(() => moduleToProto(m)).toThrow(/tuple shapes nest deeper than 200/);
    }
  });

  it("201 deep in the bytes: moduleFromProto and moduleFromMessage name the limit", () => {
    const msg = moduleToMessage(parseHlo(moduleText(200)));
    const p = msg.computations[0]!.instructions[0]!;
    p.shape = create(ShapeProtoSchema, { elementType: PrimitiveType.TUPLE, tupleShapes: [p.shape!] });
    expect(() => moduleFromMessage(msg)).toThrow(/tuple shapes nest deeper than 200/);
    // One level past what a valid module holds: the decoder's limit, in words.
    rejects(
      toBinary(HloModuleProtoSchema, msg),
      new RegExp(
        "at byte \\d+, in LayoutProto \\(computations\\[0\\]\\.instructions\\[0\\]\\.shape\\." +
          "tuple_shapes\\[0\\] \\(x201\\)\\.layout\\): messages nest deeper than 205 " +
          "\\(tuple shapes may nest at most 200 deep\\)",
      ),
    );
  });
});
