// The wasm renderer of kernel IR: each scheduled kernel (runtime/kernel/schedule.ts) becomes
// one WebAssembly function `k(b0.., s0.., lo0, hi0[, lo1, hi1])` — buffer parameters are byte
// addresses in the one imported memory, sizes and ranges i32 — and every kernel of a program
// goes into ONE module (identical kernels once: a function is keyed by its encoded bytes).
// Element values compute in their own type (f32 as wasm f32: IEEE single, one rounding per
// op, which is the evaluator's double-then-round for +, -, *, /, sqrt; f16 and bf16 in f32
// rounded to the type after every op; s32 with wasm's wrapping i32; u8 masked to 8 bits;
// pred as i32 0/1). The element ops are one table typed
// over the scalar opcodes (`wasmOps`), written with lane expressions (lanes.ts), so the same
// entry serves the scalar loops and the SIMD128 loops; transcendental functions are the
// polynomials of math.ts (kiln_math.h's), inline, never calls into JS.
//
// SIMD128: an innermost parallel loop whose body is lets and float stores, every load and
// store at unit stride in the loop variable, and every value a float (f32, or f16/bf16 in f32
// storage) or a pred mask between a compare and a select, runs four lanes per iteration with
// a scalar tail; an innermost reduce loop adding into one f32 accumulator keeps four partial
// sums (reduceCandidate); anything else stays scalar (NoVector). s64 elements are scalar i64;
// power, sine, cosine, tan, atan2, cbrt and float remainder are scalar f64 code (math.ts).
// What the renderer cannot express (an element type no kernel computes in) throws an
// UnsupportedError naming it, and the backend runs the module on js.

import type { ElementType } from "../../ir/shape.ts";
import { UnsupportedError } from "../backend.ts";
import {
  ixAtoms,
  type Ix,
  isIx,
  type Kernel,
  type Node,
  type ScalarOpcode,
  type Sx,
} from "../kernel/kir.ts";
import { nonNegative } from "../js/render_kernel.ts";
import { type Expr, type SCmp, type ScheduledKernel, type SStmt } from "../kernel/schedule.ts";
import { Fn, ModuleBuilder, type ValType } from "./encode.ts";
import { type E, f32Bits, type Kind, Lanes, NoVector } from "./lanes.ts";
import {
  atan2f,
  cbrtf,
  erff,
  expf,
  expm1f,
  fmodf,
  log1pf,
  logf,
  logisticf,
  powf,
  tanhf,
  trigf,
} from "./math.ts";

/** Log2 of the storage size of the element types kernels compute in here. */
const SHIFT: Partial<Record<ElementType, number>> = {
  f32: 2, f16: 2, bf16: 2, s32: 2, u8: 0, pred: 0, s64: 3,
};

/** Float element types (f16 and bf16 live in f32 storage, as the Literal's Float32Array). */
const isFloatType = (t: ElementType) => t === "f32" || t === "f16" || t === "bf16";

function decline(what: string): never {
  throw new UnsupportedError("wasm", what);
}

/** The lane kind of an element type (declines the types wasm kernels do not compute in). */
export function kindOf(t: ElementType): Kind {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
      return "f";
    case "s32":
    case "u8":
      return "i";
    case "pred":
      return "m";
    case "s64":
      return "l";
    default:
      return decline(`${t} elements (wasm kernels compute in f32, f16, bf16, s32, s64, u8 ` +
        `and pred)`);
  }
}

function valType(k: Kind): ValType {
  return k === "f" ? "f32" : k === "l" ? "i64" : "i32";
}

export interface OpCtx {
  readonly L: Lanes;
  readonly a: readonly E[];
  readonly type: ElementType;
  readonly argType: ElementType;
  readonly node: Extract<Sx, { op: "apply" }>;
}

export type WasmOp = (c: OpCtx) => E;

const isF = (c: OpCtx) => isFloatType(c.argType);

/**
 * An f32 value rounded to the nearest f16 (ties to even) as an f32: what the evaluator's
 * roundToF16 does to the f32-rounded double (so an op computed in f32, then rounded here,
 * is the evaluator's value). Subnormal halves round at a quantum of 2^-24 by adding and
 * subtracting 0.5; overflow (|x| rounding to 2^16 or more) gives infinity; NaN stays.
 */
export function roundF16(L: Lanes, x: E): E {
  const xv = L.let(x);
  const ax = L.let(L.abs(xv));
  const b = L.let(L.bits(xv));
  const rn = L.fromBits(L.and(L.iadd(b, L.iadd(L.i(0xfff), L.and(L.shrU(b, 13), L.i(1)))),
    L.i(~0x1fff)));
  const rs = L.copysign(L.sub(L.add(ax, L.f(0.5)), L.f(0.5)), xv);
  const r = L.let(L.sel(L.lt(ax, L.f(2 ** -14)), rs, rn));
  const big = L.sel(L.ge(L.abs(r), L.f(65536)), L.copysign(L.f(Infinity), xv), r);
  return L.sel(L.isNan(xv), xv, big);
}

/** An f32 value rounded to the nearest bf16 (ties to even, the top 16 bits) as an f32. */
export function roundBF16(L: Lanes, x: E): E {
  const xv = L.let(x);
  const b = L.let(L.bits(xv));
  const r = L.fromBits(L.and(L.iadd(b, L.iadd(L.i(0x7fff), L.and(L.shrU(b, 16), L.i(1)))),
    L.i(0xffff0000 | 0)));
  return L.sel(L.isNan(xv), xv, r);
}

/** A scalar-only i32 binary op (the SIMD loops never see integer elements). */
function ibin(c: OpCtx, a: E, b: E, op: (f: Fn) => void): E {
  if (c.L.simd) throw new NoVector(`${c.node.opcode} on ${c.argType}`);
  return c.L.raw("i", () => {
    a.emit();
    b.emit();
    op(c.L.fn);
  });
}

const u8 = (c: OpCtx, x: E) => c.L.and(x, c.L.i(255));

function noOp(c: OpCtx, why = ""): never {
  return decline(`${c.node.opcode} on ${c.argType}${why} has no wasm kernel yet`);
}

/** A float transcendental from math.ts (f32 only: half types are declined before). */
const mathF = (f: (L: Lanes, x: E) => E): WasmOp => (c) => (isF(c) ? f(c.L, c.a[0]!) : noOp(c));

/** sin / cos / tan: f64 code from math.ts (scalar; a SIMD loop keeps the scalar form). */
const trig = (which: "sin" | "cos" | "tan"): WasmOp => (c) => {
  const { L } = c;
  if (!isF(c)) return noOp(c);
  if (L.simd) throw new NoVector(which);
  const x = c.a[0]!;
  return L.raw("f", () => {
    x.emit();
    const xl = L.fn.local("f32");
    L.fn.localSet(xl);
    trigf(L.fn, xl, which);
  });
};

/** A binary float op of math.ts's f64 code (scalar): the operands into f32 locals first. */
function f64Binary(c: OpCtx, op: (f: Fn, a: number, b: number) => void): E {
  const { L } = c;
  if (!isF(c)) return noOp(c);
  if (L.simd) throw new NoVector(c.node.opcode);
  const [a, b] = c.a as [E, E];
  return L.raw("f", () => {
    a.emit();
    const al = L.fn.local("f32");
    L.fn.localSet(al);
    b.emit();
    const bl = L.fn.local("f32");
    L.fn.localSet(bl);
    op(L.fn, al, bl);
  });
}

/** Integer element as i32 (a pred is already 0/1 as a scalar). */
const asI = (c: OpCtx, x: E): E => (x.kind === "m" ? c.L.maskBits(x) : x);

function minMax(c: OpCtx): E {
  const { L } = c;
  const [a, b] = c.a as [E, E];
  const max = c.node.opcode === "maximum";
  if (isF(c)) {
    // std::max / std::min: NaN propagates (the lhs first); ties keep the lhs.
    const pick = max ? L.sel(L.lt(a, b), b, a) : L.sel(L.lt(b, a), b, a);
    return L.sel(L.isNan(a), a, L.sel(L.isNan(b), b, pick));
  }
  if (L.simd) throw new NoVector(`${c.node.opcode} on ${c.argType}`);
  const ai = asI(c, a);
  const bi = asI(c, b);
  const r = max ? L.sel(L.icmp(ai, bi, "lt"), bi, ai) : L.sel(L.icmp(bi, ai, "lt"), bi, ai);
  return c.argType === "pred" ? L.raw("m", r.emit) : r;
}

function compare(c: OpCtx): E {
  const { L } = c;
  const [a, b] = c.a as [E, E];
  const dir = c.node.direction!;
  const rel = { EQ: "eq", NE: "ne", LT: "lt", LE: "le", GT: "gt", GE: "ge" } as const;
  if (isF(c)) {
    if (c.node.comparison === "TOTALORDER") {
      // The bits as a signed integer in IEEE totalOrder: negatives' magnitude bits flipped.
      const key = (x: E) => {
        const i = L.let(L.bits(x));
        return L.let(L.xor(i, L.shrU(L.shrS(i, 31), 1)));
      };
      return L.icmp(key(a), key(b), rel[dir]);
    }
    const r = rel[dir];
    return r === "eq" ? L.eq(a, b) : r === "ne" ? L.ne(a, b) : r === "lt" ? L.lt(a, b)
      : r === "le" ? L.le(a, b) : r === "gt" ? L.gt(a, b) : L.ge(a, b);
  }
  if (L.simd) throw new NoVector(`compare on ${c.argType}`);
  return L.icmp(asI(c, a), asI(c, b), rel[dir]);
}

function convert(c: OpCtx): E {
  const { L } = c;
  const x = c.a[0]!;
  const from = c.argType;
  const to = c.type;
  if (from === to) return x;
  if (to === "s64" || from === "s64") {
    if (L.simd) throw new NoVector(`convert ${from}->${to}`);
    return convert64(c);
  }
  if (to === "pred") {
    if (isFloatType(from)) return L.ne(x, L.f(0));
    if (L.simd) throw new NoVector(`convert ${from}->pred`);
    return L.icmp(x, L.i(0), "ne");
  }
  if (from === "pred") {
    if (isFloatType(to)) return L.maskToFloat(x);
    if (L.simd) throw new NoVector(`convert pred->${to}`);
    return L.maskBits(x);
  }
  if (L.simd) throw new NoVector(`convert ${from}->${to}`);
  if (isFloatType(from) && isFloatType(to)) return x; // the result is rounded to `to` after
  if (isFloatType(from)) {
    if (to === "s32") return L.toInt(x);
    // u8: truncate, NaN to 0, saturate at 0 and 255.
    const t = L.let(L.toInt(x));
    return L.sel(L.icmp(t, L.i(0), "lt"), L.i(0), L.sel(L.icmp(t, L.i(255), "gt"), L.i(255), t));
  }
  if (isFloatType(to)) return L.toFloat(x);
  if (to === "u8") return u8(c, x);
  return x; // u8 -> s32
}

/** i64 code: `a op b` on the stack's values. */
const l2 = (L: Lanes, a: E, b: E, op: (f: Fn) => void, kind: Kind = "l"): E =>
  L.raw(kind, () => {
    a.emit();
    b.emit();
    op(L.fn);
  });

const lc = (L: Lanes, v: bigint): E => L.raw("l", () => L.fn.i64Const(v));

function lcmp(L: Lanes, a: E, b: E, rel: "eq" | "ne" | "lt" | "gt" | "le" | "ge" | "geu"): E {
  return l2(L, a, b, (f) => {
    ({ eq: () => f.i64Eq(), ne: () => f.i64Ne(), lt: () => f.i64LtS(), gt: () => f.i64GtS(),
      le: () => f.i64LeS(), ge: () => f.i64GeS(), geu: () => f.i64GeU() })[rel]();
  }, "m");
}

/** convert to or from s64 (scalar: i64 values). */
function convert64(c: OpCtx): E {
  const { L } = c;
  const x = c.a[0]!;
  const f = L.fn;
  if (c.type === "s64") {
    if (isFloatType(c.argType)) return L.raw("l", () => (x.emit(), f.i64TruncSatF32S()));
    const xi = x.kind === "m" ? L.maskBits(x) : x;
    return L.raw("l", () => (xi.emit(), f.i64ExtendI32S()));
  }
  switch (c.type) {
    case "f32":
    case "f16":
    case "bf16":
      return L.raw("f", () => (x.emit(), f.f32ConvertI64S()));
    case "s32":
      return L.raw("i", () => (x.emit(), f.i32WrapI64()));
    case "u8":
      return u8(c, L.raw("i", () => (x.emit(), f.i32WrapI64())));
    case "pred":
      return lcmp(L, x, lc(L, 0n), "ne");
    default:
      return noOp(c);
  }
}

/** The element ops on s64 operands (scalar i64; the evaluator's wrapping semantics). */
function int64(c: OpCtx): E {
  const { L } = c;
  const [a, b, h] = c.a as [E, E, E];
  const op = c.node.opcode;
  switch (op) {
    case "abs":
      return L.sel(lcmp(L, a, lc(L, 0n), "lt"), l2(L, lc(L, 0n), a, (f) => f.i64Sub()), a);
    case "negate":
      return l2(L, lc(L, 0n), a, (f) => f.i64Sub());
    case "sign":
      return L.sel(lcmp(L, a, lc(L, 0n), "gt"), lc(L, 1n),
        L.sel(lcmp(L, a, lc(L, 0n), "lt"), lc(L, -1n), lc(L, 0n)));
    case "not":
      return l2(L, a, lc(L, -1n), (f) => f.i64Xor());
    case "copy":
      return a;
    case "select":
      return L.sel(a, b, h);
    case "convert":
      return convert(c);
    case "add":
      return l2(L, a, b, (f) => f.i64Add());
    case "subtract":
      return l2(L, a, b, (f) => f.i64Sub());
    case "multiply":
      return l2(L, a, b, (f) => f.i64Mul());
    case "and":
      return l2(L, a, b, (f) => f.i64And());
    case "or":
      return l2(L, a, b, (f) => f.i64Or());
    case "xor":
      return l2(L, a, b, (f) => f.i64Xor());
    case "divide":
    case "remainder": {
      const zero = L.let(lcmp(L, b, lc(L, 0n), "eq"));
      if (op === "remainder") {
        const safe = L.let(L.sel(zero, lc(L, 1n), b));
        return L.sel(zero, a, l2(L, a, safe, (f) => f.i64RemS()));
      }
      const over = L.and(lcmp(L, a, lc(L, -(2n ** 63n)), "eq"), lcmp(L, b, lc(L, -1n), "eq"));
      const safe = L.let(L.sel(L.or(zero, over), lc(L, 1n), b));
      return L.sel(zero, lc(L, -1n), l2(L, a, safe, (f) => f.i64DivS()));
    }
    case "maximum":
      return L.sel(lcmp(L, a, b, "lt"), b, a);
    case "minimum":
      return L.sel(lcmp(L, b, a, "lt"), b, a);
    case "shift-left":
    case "shift-right-logical":
    case "shift-right-arithmetic": {
      const out = L.let(lcmp(L, b, lc(L, 64n), "geu"));
      if (op === "shift-left") return L.sel(out, lc(L, 0n), l2(L, a, b, (f) => f.i64Shl()));
      if (op === "shift-right-logical") {
        return L.sel(out, lc(L, 0n), l2(L, a, b, (f) => f.i64ShrU()));
      }
      return L.sel(out, l2(L, a, lc(L, 63n), (f) => f.i64ShrS()),
        l2(L, a, b, (f) => f.i64ShrS()));
    }
    case "compare": {
      const rel = { EQ: "eq", NE: "ne", LT: "lt", LE: "le", GT: "gt", GE: "ge" } as const;
      return lcmp(L, a, b, rel[c.node.direction!]);
    }
    case "power":
      return ipow(c, "l");
    case "clamp": {
      // clamp(lo, x, hi): min(hi, max(x, lo)).
      const m = L.let(L.sel(lcmp(L, b, a, "lt"), a, b));
      return L.sel(lcmp(L, m, h, "lt"), m, h);
    }
    default:
      return noOp(c);
  }
}

/**
 * XLA's integer power (the evaluator's ipow32 / ipowU8 / ipow64): x^0 = 1^y = 1, a negative
 * exponent 0, else square-and-multiply with wrapping products.
 */
function ipow(c: OpCtx, kind: "i" | "l"): E {
  const { L } = c;
  const f = L.fn;
  const [a, b] = c.a as [E, E];
  const w = kind === "l";
  const one = () => (w ? f.i64Const(1n) : f.i32Const(1));
  const zero = () => (w ? f.i64Const(0n) : f.i32Const(0));
  return L.raw(kind, () => {
    const vt = w ? "i64" : "i32";
    const base = f.local(vt);
    const e = f.local(vt);
    const r = f.local(vt);
    const a0 = f.local(vt);
    a.emit();
    f.localTee(a0).localSet(base);
    b.emit();
    f.localSet(e);
    const b0 = f.local(vt);
    f.localGet(e).localSet(b0);
    one();
    f.localSet(r);
    f.block().loop();
    f.localGet(e);
    if (w) f.i64Eqz();
    else f.i32Eqz();
    f.brIf(1);
    // if (e & 1) r *= base
    f.localGet(r).localGet(base);
    if (w) f.i64Mul();
    else f.i32Mul();
    f.localGet(r);
    f.localGet(e);
    if (w) f.i64Const(1n).i64And().i32WrapI64();
    else f.i32Const(1).i32And();
    f.select().localSet(r);
    f.localGet(base).localGet(base);
    if (w) f.i64Mul().localSet(base).localGet(e).i64Const(1n).i64ShrU().localSet(e);
    else f.i32Mul().localSet(base).localGet(e).i32Const(1).i32ShrU().localSet(e);
    f.br(0).end().end();
    if (c.argType === "u8") f.localGet(r).i32Const(255).i32And().localSet(r);
    // a negative exponent gives 0 (u8 has none); then x^0 = 1^y = 1
    zero();
    f.localGet(r);
    f.localGet(b0);
    zero();
    if (w) f.i64LtS();
    else f.i32LtS();
    f.select().localSet(r);
    one();
    f.localGet(r);
    f.localGet(a0);
    one();
    if (w) f.i64Eq();
    else f.i32Eq();
    f.localGet(b0);
    if (w) f.i64Eqz();
    else f.i32Eqz();
    f.i32Or();
    f.select();
  });
}

/** Integer divide and remainder with XLA's values where wasm would trap. */
function divRem(c: OpCtx): E {
  const { L } = c;
  const [a, b] = c.a as [E, E];
  const div = c.node.opcode === "divide";
  if (c.argType === "pred") {
    // b == 0: divide gives 1 (true), remainder a; else a and 0.
    const ai = L.maskBits(a);
    const bz = L.let(L.icmp(L.maskBits(b), L.i(0), "eq"));
    return L.raw("m", (div ? L.sel(bz, L.i(1), ai) : L.sel(bz, ai, L.i(0))).emit);
  }
  const zero = L.let(L.icmp(b, L.i(0), "eq"));
  if (c.argType === "u8") {
    const safe = L.let(L.sel(zero, L.i(1), b));
    if (div) return L.sel(zero, L.i(255), ibin(c, a, safe, (f) => f.i32DivU()));
    return L.sel(zero, a, ibin(c, a, safe, (f) => f.i32RemU()));
  }
  if (div) {
    // x/0 = -1; INT_MIN/-1 = INT_MIN (divide by 1 instead, as wasm traps on both).
    const over = L.and(L.icmp(a, L.i(-2147483648), "eq"), L.icmp(b, L.i(-1), "eq"));
    const safe = L.let(L.sel(L.or(zero, over), L.i(1), b));
    return L.sel(zero, L.i(-1), ibin(c, a, safe, (f) => f.i32DivS()));
  }
  // x%0 = x; wasm's rem_s gives 0 for INT_MIN % -1 (no trap).
  const safe = L.let(L.sel(zero, L.i(1), b));
  return L.sel(zero, a, ibin(c, a, safe, (f) => f.i32RemS()));
}

function shift(c: OpCtx): E {
  const { L } = c;
  const [a, b] = c.a as [E, E];
  const op = c.node.opcode;
  if (c.argType !== "s32" && c.argType !== "u8") noOp(c);
  const width = c.argType === "s32" ? 32 : 8;
  const out = L.let(L.icmp(b, L.i(width), "geu")); // negative or >= the width
  if (c.argType === "s32") {
    if (op === "shift-left") return L.sel(out, L.i(0), ibin(c, a, b, (f) => f.i32Shl()));
    if (op === "shift-right-logical") {
      return L.sel(out, L.i(0), ibin(c, a, b, (f) => f.i32ShrU()));
    }
    return L.sel(out, L.shrS(a, 31), ibin(c, a, b, (f) => f.i32ShrS()));
  }
  if (op === "shift-left") return L.sel(out, L.i(0), u8(c, ibin(c, a, b, (f) => f.i32Shl())));
  if (op === "shift-right-logical") return L.sel(out, L.i(0), ibin(c, a, b, (f) => f.i32ShrU()));
  // As s8: sign-extend, shift by min(b, 7), back to 8 bits.
  const s = L.let(L.sel(out, L.i(7), b));
  return u8(c, ibin(c, L.shrS(L.shl(a, 24), 24), s, (f) => f.i32ShrS()));
}

/** Add / subtract / multiply per type. */
function arith(
  fop: (L: Lanes, a: E, b: E) => E,
  iop: (c: OpCtx, a: E, b: E) => E,
  pop: (L: Lanes, a: E, b: E) => E,
): WasmOp {
  return (c) => {
    const [a, b] = c.a as [E, E];
    if (isF(c)) return fop(c.L, a, b);
    if (c.argType === "pred") return pop(c.L, a, b);
    if (c.L.simd) throw new NoVector(`${c.node.opcode} on ${c.argType}`);
    const r = iop(c, a, b);
    return c.argType === "u8" ? u8(c, r) : r;
  };
}

/** The element ops, one per scalar opcode (a missing one does not compile). */
export const wasmOps = {
  abs: (c) => {
    const { L } = c;
    const a = c.a[0]!;
    if (isF(c)) return L.abs(a);
    if (c.argType === "s32") return L.sel(L.icmp(a, L.i(0), "lt"), L.isub(L.i(0), a), a);
    return a;
  },
  negate: (c) => {
    const { L } = c;
    const a = c.a[0]!;
    if (isF(c)) return L.neg(a);
    if (c.argType === "s32") return L.isub(L.i(0), a);
    if (c.argType === "u8") return u8(c, L.isub(L.i(0), a));
    return a;
  },
  sign: (c) => {
    const { L } = c;
    const a = c.a[0]!;
    if (isF(c)) {
      return L.sel(L.or(L.isNan(a), L.eq(a, L.f(0))), a, L.copysign(L.f(1), a));
    }
    if (c.argType === "s32") {
      return L.sel(L.icmp(a, L.i(0), "gt"), L.i(1),
        L.sel(L.icmp(a, L.i(0), "lt"), L.i(-1), L.i(0)));
    }
    if (c.argType === "u8") return L.sel(L.icmp(a, L.i(0), "gt"), L.i(1), L.i(0));
    return a;
  },
  exponential: mathF(expf),
  "exponential-minus-one": mathF(expm1f),
  log: mathF(logf),
  "log-plus-one": mathF(log1pf),
  sqrt: (c) => (isF(c) ? c.L.sqrt(c.a[0]!) : noOp(c)),
  rsqrt: (c) => (isF(c) ? c.L.div(c.L.f(1), c.L.sqrt(c.a[0]!)) : noOp(c)),
  cbrt: (c) => {
    const { L } = c;
    if (!isF(c)) return noOp(c);
    if (L.simd) throw new NoVector("cbrt");
    const x = c.a[0]!;
    return L.raw("f", () => {
      x.emit();
      const xl = L.fn.local("f32");
      L.fn.localSet(xl);
      cbrtf(L.fn, xl);
    });
  },
  tanh: mathF(tanhf),
  logistic: mathF(logisticf),
  sine: trig("sin"),
  cosine: trig("cos"),
  tan: trig("tan"),
  erf: mathF(erff),
  floor: (c) => (isF(c) ? c.L.floor(c.a[0]!) : c.a[0]!),
  ceil: (c) => (isF(c) ? c.L.ceil(c.a[0]!) : c.a[0]!),
  "round-nearest-afz": (c) => {
    if (!isF(c)) return c.a[0]!;
    const { L } = c;
    const x = c.a[0]!;
    // x - trunc(x) is exact in f32; halves go away from zero; the sign of zero is kept.
    const t = L.let(L.trunc(x));
    return L.sel(L.ge(L.abs(L.sub(x, t)), L.f(0.5)), L.add(t, L.copysign(L.f(1), x)), t);
  },
  "round-nearest-even": (c) => (isF(c) ? c.L.nearest(c.a[0]!) : c.a[0]!),
  "is-finite": (c) => c.L.lt(c.L.abs(c.a[0]!), c.L.f(Number.POSITIVE_INFINITY)),
  not: (c) => {
    const { L } = c;
    const a = c.a[0]!;
    if (c.argType === "pred") return L.not(a);
    if (L.simd) throw new NoVector(`not on ${c.argType}`);
    return L.xor(a, L.i(c.argType === "u8" ? 255 : -1));
  },
  copy: (c) => c.a[0]!,
  convert,
  add: arith((L, a, b) => L.add(a, b), (c, a, b) => c.L.iadd(a, b), (L, a, b) => L.or(a, b)),
  subtract: arith((L, a, b) => L.sub(a, b), (c, a, b) => c.L.isub(a, b),
    (L, a, b) => L.xor(a, b)),
  multiply: arith((L, a, b) => L.mul(a, b), (c, a, b) => ibin(c, a, b, (f) => f.i32Mul()),
    (L, a, b) => L.and(a, b)),
  divide: (c) => {
    if (isF(c)) return c.L.div(c.a[0]!, c.a[1]!);
    if (c.L.simd) throw new NoVector(`divide on ${c.argType}`);
    return divRem(c);
  },
  remainder: (c) => {
    if (isF(c)) return f64Binary(c, fmodf);
    if (c.L.simd) throw new NoVector(`remainder on ${c.argType}`);
    return divRem(c);
  },
  power: (c) => {
    const { L } = c;
    if (c.argType === "pred") return L.or(c.a[0]!, L.not(c.a[1]!)); // a | (1 - b)
    if (L.simd) throw new NoVector(`power on ${c.argType}`);
    if (isF(c)) {
      const [a, b] = [L.let(c.a[0]!), L.let(c.a[1]!)];
      return L.raw("f", () => {
        // the locals of the two operands (bound just above)
        a.emit();
        const al = L.fn.local("f32");
        L.fn.localSet(al);
        b.emit();
        const bl = L.fn.local("f32");
        L.fn.localSet(bl);
        powf(L.fn, al, bl);
      });
    }
    return ipow(c, "i");
  },
  maximum: minMax,
  minimum: minMax,
  atan2: (c) => f64Binary(c, atan2f),
  and: (c) => (c.L.simd && c.argType !== "pred" ? noVec(c) : c.L.and(c.a[0]!, c.a[1]!)),
  or: (c) => (c.L.simd && c.argType !== "pred" ? noVec(c) : c.L.or(c.a[0]!, c.a[1]!)),
  xor: (c) => (c.L.simd && c.argType !== "pred" ? noVec(c) : c.L.xor(c.a[0]!, c.a[1]!)),
  "shift-left": shift,
  "shift-right-arithmetic": shift,
  "shift-right-logical": shift,
  compare,
  select: (c) => c.L.sel(c.a[0]!, c.a[1]!, c.a[2]!),
  clamp: (c) => {
    const { L } = c;
    const [l, x, h] = c.a as [E, E, E];
    if (isF(c)) {
      // NaN in lo, x, hi (in that order) wins; else min(hi, max(x, lo)).
      const m = L.let(L.sel(L.lt(x, l), l, x));
      return L.sel(L.isNan(l), l, L.sel(L.isNan(x), x, L.sel(L.isNan(h), h,
        L.sel(L.lt(m, h), m, h))));
    }
    if (L.simd) throw new NoVector(`clamp on ${c.argType}`);
    const li = asI(c, l);
    const xi = asI(c, x);
    const hi = asI(c, h);
    const m = L.let(L.sel(L.icmp(xi, li, "lt"), li, xi));
    const r = L.sel(L.icmp(m, hi, "lt"), m, hi);
    return c.argType === "pred" ? L.raw("m", r.emit) : r;
  },
} satisfies { readonly [K in ScalarOpcode]: WasmOp };

function noVec(c: OpCtx): never {
  throw new NoVector(`${c.node.opcode} on ${c.argType}`);
}

/** Whether `x` is `v` plus terms free of `v` (unit stride in loop variable v). */
export function unitStride(x: Ix, v: number): boolean {
  const freeOfV = (a: Ix) =>
    [...ixAtoms(a)].every((t) => t.op !== "value" && !(t.op === "var" && t.id === v));
  if (x.op === "var") return x.id === v;
  if (x.op !== "sum") return false;
  let unit = 0;
  for (const t of x.terms) {
    if (t.atom.op === "var" && t.atom.id === v) {
      if (t.coef !== 1) return false;
      unit++;
    } else if (!freeOfV(t.atom)) {
      return false;
    }
  }
  return unit === 1;
}

interface Named {
  readonly local: number;
  readonly kind: Kind | "index";
}

/** SIMD lanes per vector (f32x4). */
export const LANES = 4;

/** Emits one scheduled kernel as a wasm function. */
class KernelEmitter {
  readonly fn: Fn;
  private readonly k: Kernel;
  private readonly names = new Map<number, Named>();
  /** Lets bound inside the loop being vectorized (v128 locals or lane-0 indices). */
  private vnames: Map<number, Named> | undefined;
  private readonly varLocal = new Map<number, number>();
  private readonly accLocal = new Map<number, number>();
  private readonly scalar: Lanes;
  private readonly vector: Lanes;
  /** The loop variable being vectorized, and the store index of each buffer it writes. */
  private vloop: { v: number; stores: Map<number, Ix>; updates?: number } | undefined;
  vectorized = 0;

  constructor(
    private readonly sk: ScheduledKernel,
    private readonly simd: boolean,
    private readonly declineOp?: string,
  ) {
    this.k = sk.kernel;
    const n = this.k.bufs.length + this.k.sizes + 2 * this.k.ranges;
    this.fn = new Fn(Array.from({ length: n }, () => "i32" as const), []);
    this.scalar = new Lanes(this.fn, false);
    this.vector = new Lanes(this.fn, true);
    for (const b of this.k.bufs) kindOf(b.type);
  }

  emit(): Fn {
    this.stmts(this.sk.body, false);
    return this.fn;
  }

  private sizeParam(i: number): number {
    return this.k.bufs.length + i;
  }

  private rangeParam(r: number, hi: boolean): number {
    return this.k.bufs.length + this.k.sizes + 2 * r + (hi ? 1 : 0);
  }

  private varOf(v: number): number {
    let l = this.varLocal.get(v);
    if (l === undefined) this.varLocal.set(v, (l = this.fn.local("i32")));
    return l;
  }

  private lookup(n: number): Named {
    const x = this.vnames?.get(n) ?? this.names.get(n);
    if (!x) throw new Error(`wasm renderer: t${n} used before it is bound`);
    return x;
  }

  // ---- index expressions (i32, scalar) ----

  private ix(e: Expr): void {
    const f = this.fn;
    switch (e.e) {
      case "name": {
        const x = this.lookup(e.n);
        f.localGet(x.local);
        if (x.kind === "m" && this.vnames?.has(e.n)) throw new NoVector("a pred as an index");
        return;
      }
      case "lin": {
        let first = true;
        for (const t of e.terms) {
          this.ix(t.x);
          if (t.coef !== 1) f.i32Const(t.coef).i32Mul();
          if (!first) f.i32Add();
          first = false;
        }
        if (first) f.i32Const(e.k);
        else if (e.k !== 0) f.i32Const(e.k).i32Add();
        return;
      }
      case "node":
        this.ixNode(e.node, e.args);
        return;
      default: {
        const never: never = e;
        throw new Error(`unknown expression ${String(never)}`);
      }
    }
  }

  private ixNode(n: Node, args: readonly Expr[]): void {
    const f = this.fn;
    if (!isIx(n)) throw new Error(`wasm renderer: a ${n.op} where an index was expected`);
    switch (n.op) {
      case "const":
        f.i32Const(n.v);
        return;
      case "var":
        f.localGet(this.varOf(n.id));
        return;
      case "size":
        f.localGet(this.sizeParam(n.id));
        return;
      case "prod":
        args.forEach((a, i) => {
          this.ix(a);
          if (i > 0) f.i32Mul();
        });
        return;
      case "floordiv": {
        if (nonNegative(n.a)) {
          this.ix(args[0]!);
          this.ix(args[1]!);
          f.i32DivS();
          return;
        }
        // floor(a / b) for b > 0: the truncated quotient, less one when the remainder < 0.
        const a = f.local("i32");
        const b = f.local("i32");
        this.ix(args[0]!);
        f.localSet(a);
        this.ix(args[1]!);
        f.localSet(b);
        f.localGet(a).localGet(b).i32DivS();
        f.localGet(a).localGet(b).i32RemS().i32Const(31).i32ShrU().i32Sub();
        return;
      }
      case "mod": {
        if (nonNegative(n.a)) {
          this.ix(args[0]!);
          this.ix(args[1]!);
          f.i32RemS();
          return;
        }
        const r = f.local("i32");
        const b = f.local("i32");
        this.ix(args[1]!);
        f.localSet(b);
        this.ix(args[0]!);
        f.localGet(b).i32RemS().localTee(r);
        f.localGet(b).localGet(r).i32Const(31).i32ShrS().i32And().i32Add();
        return;
      }
      case "min":
      case "max": {
        const a = f.local("i32");
        const b = f.local("i32");
        this.ix(args[0]!);
        f.localTee(a);
        this.ix(args[1]!);
        f.localTee(b);
        f.localGet(a).localGet(b);
        if (n.op === "min") f.i32LtS();
        else f.i32GtS();
        f.select();
        return;
      }
      case "value": {
        const v = this.value(args[0]!, this.scalar);
        if (v.kind === "f") throw new Error("wasm renderer: a float element as an index");
        v.emit();
        if (v.kind === "l") f.i32WrapI64();
        return;
      }
      case "sum":
        throw new Error("a sum reaches the renderer as a linear expression");
      default: {
        const never: never = n;
        throw new Error(`unknown index node ${String(never)}`);
      }
    }
  }

  private cmps(when: readonly SCmp[]): void {
    const f = this.fn;
    when.forEach((c, i) => {
      this.ix(c.a);
      this.ix(c.b);
      ({ lt: () => f.i32LtS(), le: () => f.i32LeS(), eq: () => f.i32Eq(),
        ne: () => f.i32Ne() })[c.rel]();
      if (i > 0) f.i32And();
    });
    if (when.length === 0) f.i32Const(1);
  }

  /** Byte address of element `index` of buffer `buf`. */
  private address(buf: number, index: Expr): void {
    const t = this.k.bufs[buf]!.type;
    this.fn.localGet(buf);
    this.ix(index);
    const s = SHIFT[t]!;
    if (s !== 0) this.fn.i32Const(s).i32Shl();
    this.fn.i32Add();
  }

  // ---- element values ----

  private isAtom(e: Expr): boolean {
    return e.e === "name" || (e.e === "node" && e.args.length === 0);
  }

  /** The element value of `e` in lanes L (lets it needs are emitted as it is built). */
  private value(e: Expr, L: Lanes): E {
    const f = this.fn;
    if (e.e === "lin") throw new Error("wasm renderer: an index sum where a value was expected");
    if (e.e === "name") {
      const x = this.lookup(e.n);
      if (x.kind === "index") throw new Error(`wasm renderer: index t${e.n} used as a value`);
      const kind = x.kind;
      if (!L.simd || this.vnames?.has(e.n)) return L.get(x.local, kind);
      if (kind === "l") throw new NoVector("an s64 value");
      // A scalar bound outside the vector loop: splat it.
      return L.raw(kind, () => {
        if (kind === "f") f.localGet(x.local).f32x4Splat();
        else if (kind === "m") f.i32Const(0).localGet(x.local).i32Sub().i32x4Splat();
        else throw new NoVector("an integer element");
      });
    }
    const n = e.node;
    if (isIx(n)) throw new Error(`wasm renderer: index node ${n.op} used as a value`);
    const kind = kindOf(n.type);
    if (L.simd && (kind === "i" || kind === "l")) throw new NoVector(`${n.type} elements`);
    switch (n.op) {
      case "const": {
        const v = Number(n.value);
        if (kind === "f") return L.raw("f", () => {
          if (L.simd) f.v128Const([v, v, v, v]);
          else if (Number.isNaN(v)) f.f32Bits(0x7fc00000);
          else f.f32Const(v);
        });
        if (kind === "m") return L.m(v !== 0);
        if (kind === "l") return lc(L, BigInt.asIntN(64, BigInt(n.value)));
        return L.i(n.type === "u8" ? v & 255 : v | 0);
      }
      case "load": {
        const t = n.type;
        if (L.simd) {
          const vl = this.vloop!;
          if (!isFloatType(t) || !unitStride(n.index, vl.v)) throw new NoVector("a strided load");
          const st = vl.stores.get(n.buf);
          if (this.k.bufs[n.buf]!.access !== "r" && st !== n.index) {
            throw new NoVector("a load of a written buffer at another index");
          }
          return L.raw("f", () => {
            this.address(n.buf, e.args[0]!);
            f.v128Load();
          });
        }
        return L.raw(kind, () => {
          this.address(n.buf, e.args[0]!);
          if (isFloatType(t)) f.f32Load();
          else if (t === "s32") f.i32Load();
          else if (t === "s64") f.i64Load();
          else f.i32Load8U();
        });
      }
      case "index": {
        if (L.simd) throw new NoVector("an iota");
        return this.rounded(n.type, L, L.raw(kind, () => {
          this.ix(e.args[0]!);
          if (isFloatType(n.type)) f.f32ConvertI32S();
          else if (n.type === "pred") f.i32Const(0).i32Ne();
          else if (n.type === "u8") f.i32Const(255).i32And();
          else if (n.type === "s64") f.i64ExtendI32S();
        }));
      }
      case "acc": {
        const l = this.accLocal.get(n.id);
        if (l === undefined) throw new Error(`wasm renderer: accumulator ${n.id} read before init`);
        if (L.simd) {
          // A vector loop updates no accumulator it reads (a reduce loop's own add is left
          // out): this one is final here, the same in every lane.
          if (kind !== "f" || this.vloop?.updates === n.id) {
            throw new NoVector(`accumulator ${n.id} in its own loop`);
          }
          return L.raw("f", () => f.localGet(l).f32x4Splat());
        }
        return L.get(l, kind);
      }
      case "cond": {
        if (L.simd) throw new NoVector("a lazy select");
        const m = n.when.length;
        return L.raw(kind, () => {
          const cmps: SCmp[] = [];
          for (let j = 0; j < m; j++) {
            cmps.push({ rel: n.when[j]!.rel, a: e.args[2 * j]!, b: e.args[2 * j + 1]! });
          }
          this.cmps(cmps);
          f.if(valType(kind));
          this.value(e.args[2 * m]!, L).emit();
          f.else();
          this.value(e.args[2 * m + 1]!, L).emit();
          f.end();
        });
      }
      case "apply": {
        if (n.opcode === this.declineOp) decline(`${n.opcode} (refused by wasmTesting.decline)`);
        const argKind = kindOf(n.argType);
        if (L.simd && (argKind === "i" || argKind === "l")) {
          throw new NoVector(`${n.argType} operands`);
        }
        const a = e.args.map((x) => {
          const v = this.value(x, L);
          return this.isAtom(x) ? v : L.let(v);
        });
        const op: WasmOp = n.argType === "s64" ? int64 : wasmOps[n.opcode];
        const r = this.rounded(n.type, L, op({ L, a, type: n.type, argType: n.argType, node: n }));
        if (r.kind !== kind) {
          throw new Error(`wasm renderer: ${n.opcode} gave a ${r.kind} value for ${n.type}`);
        }
        return r;
      }
      default: {
        const never: never = n;
        throw new Error(`unknown scalar node ${String(never)}`);
      }
    }
  }

  /** A float value of type t (computed in f32) rounded to t. */
  private rounded(t: ElementType, L: Lanes, v: E): E {
    if (t === "f16") return roundF16(L, v);
    if (t === "bf16") return roundBF16(L, v);
    return v;
  }

  // ---- statements ----

  private stmts(body: readonly SStmt[], simd: boolean): void {
    const f = this.fn;
    const L = simd ? this.vector : this.scalar;
    for (const s of body) {
      switch (s.s) {
        case "let": {
          const names = simd ? this.vnames! : this.names;
          if (s.type === "index") {
            const l = f.local("i32");
            this.ix(s.value);
            f.localSet(l);
            names.set(s.n, { local: l, kind: "index" });
            break;
          }
          const kind = kindOf(s.type);
          const v = this.value(s.value, L);
          const l = L.local(kind);
          v.emit();
          f.localSet(l);
          names.set(s.n, { local: l, kind });
          break;
        }
        case "loop":
          this.loop(s);
          break;
        case "store": {
          const t = this.k.bufs[s.buf]!.type;
          if (simd && !isFloatType(t)) throw new NoVector(`a ${t} store`);
          const v = this.value(s.value, L);
          this.address(s.buf, s.index);
          v.emit();
          if (simd) f.v128Store();
          else if (isFloatType(t)) f.f32Store();
          else if (t === "s32") f.i32Store();
          else if (t === "s64") f.i64Store();
          else f.i32Store8();
          break;
        }
        case "accInit": {
          if (simd) throw new NoVector("an accumulator");
          const kind = kindOf(s.type);
          let l = this.accLocal.get(s.acc);
          if (l === undefined) this.accLocal.set(s.acc, (l = f.local(valType(kind))));
          const v = this.value(s.value, L);
          v.emit();
          f.localSet(l);
          break;
        }
        case "accSet": {
          if (simd) throw new NoVector("an accumulator");
          const vs = s.values.map((x) => this.value(x, L));
          // Simultaneous: every new value is on the stack before any accumulator is set.
          vs.forEach((v) => v.emit());
          for (let j = s.accs.length - 1; j >= 0; j--) {
            const l = this.accLocal.get(s.accs[j]!);
            if (l === undefined) throw new Error("wasm renderer: accSet before accInit");
            f.localSet(l);
          }
          break;
        }
        case "if":
          if (simd) throw new NoVector("an if");
          this.cmps(s.when);
          f.if();
          this.stmts(s.body, false);
          f.end();
          break;
        default: {
          const never: never = s;
          throw new Error(`unknown statement ${String(never)}`);
        }
      }
    }
  }

  /** The store index of every buffer an innermost loop body writes, or undefined if unfit. */
  private vectorCandidate(s: Extract<SStmt, { s: "loop" }>): Map<number, Ix> | undefined {
    if (!this.simd || s.tag !== "parallel") return undefined;
    const stores = new Map<number, Ix>();
    for (const b of s.body) {
      if (b.s === "let") continue;
      if (b.s !== "store") return undefined;
      const idx = this.origIndex(b.index);
      if (!idx || !unitStride(idx, s.v) || !isFloatType(this.k.bufs[b.buf]!.type)) {
        return undefined;
      }
      if (stores.has(b.buf)) return undefined;
      stores.set(b.buf, idx);
    }
    return stores.size > 0 ? stores : undefined;
  }

  /**
   * A reduce loop whose body is lets and one `acc = add(acc, x)` of an f32 accumulator: the
   * let that adds (left out of the vector body) and x. Four partial sums then run in a v128
   * and are added to the accumulator before the scalar tail (a reassociated sum: the tolerance
   * tier's reduction bound).
   */
  private reduceCandidate(s: Extract<SStmt, { s: "loop" }>):
    { letIdx: number; acc: number; x: Expr } | undefined {
    if (!this.simd || s.tag !== "reduce") return undefined;
    const body = s.body;
    const last = body[body.length - 1];
    if (!last || last.s !== "accSet" || last.accs.length !== 1 || last.combiner !== "add") {
      return undefined;
    }
    for (let i = 0; i < body.length - 1; i++) if (body[i]!.s !== "let") return undefined;
    const v = last.values[0]!;
    if (v.e !== "name") return undefined;
    const letIdx = body.findIndex((b) => b.s === "let" && b.n === v.n);
    const lt = body[letIdx];
    if (!lt || lt.s !== "let" || lt.type !== "f32" || lt.value.e !== "node") return undefined;
    const node = lt.value.node;
    if (node.op !== "apply" || node.opcode !== "add" || lt.value.args.length !== 2) {
      return undefined;
    }
    const [a0, a1] = lt.value.args as [Expr, Expr];
    if (a0.e !== "node" || a0.node.op !== "acc" || a0.node.id !== last.accs[0]) return undefined;
    return { letIdx, acc: last.accs[0]!, x: a1 };
  }

  /** The index node a store's scheduled index expression stands for. */
  private origIndex(e: Expr): Ix | undefined {
    if (e.e === "name") {
      const node = e.node;
      return isIx(node) ? node : undefined;
    }
    if (e.e === "node" && isIx(e.node)) return e.node;
    return undefined;
  }

  private loop(s: Extract<SStmt, { s: "loop" }>): void {
    const f = this.fn;
    const v = this.varOf(s.v);
    const hi = f.local("i32");
    if (s.range !== undefined) {
      f.localGet(this.rangeParam(s.range, false)).localSet(v);
      f.localGet(this.rangeParam(s.range, true)).localSet(hi);
    } else {
      this.ix(s.lo);
      f.localSet(v);
      this.ix(s.hi);
      f.localSet(hi);
    }
    const red = this.reduceCandidate(s);
    if (red) {
      const mark = f.code.length;
      this.vnames = new Map();
      this.vloop = { v: s.v, stores: new Map(), updates: red.acc };
      try {
        const vacc = f.local("v128");
        f.v128Const([0, 0, 0, 0]).localSet(vacc);
        f.block().loop();
        f.localGet(hi).localGet(v).i32Sub().i32Const(LANES).i32LtS().brIf(1);
        this.stmts(s.body.filter((_, i) => i !== red.letIdx && i !== s.body.length - 1), true);
        const x = this.value(red.x, this.vector);
        f.localGet(vacc);
        x.emit();
        f.f32x4Add().localSet(vacc);
        f.localGet(v).i32Const(LANES).i32Add().localSet(v).br(0);
        f.end().end();
        // acc += (l0 + l1) + (l2 + l3)
        const accL = this.accLocal.get(red.acc);
        if (accL === undefined) throw new Error("wasm renderer: a reduction before its accInit");
        f.localGet(accL);
        f.localGet(vacc).f32x4ExtractLane(0).localGet(vacc).f32x4ExtractLane(1).f32Add();
        f.localGet(vacc).f32x4ExtractLane(2).localGet(vacc).f32x4ExtractLane(3).f32Add();
        f.f32Add().f32Add().localSet(accL);
        this.vectorized++;
      } catch (e) {
        if (!(e instanceof NoVector)) throw e;
        f.code.length = mark;
      } finally {
        this.vnames = undefined;
        this.vloop = undefined;
      }
    }
    const stores = this.vectorCandidate(s);
    if (stores) {
      const mark = f.code.length;
      this.vnames = new Map();
      this.vloop = { v: s.v, stores };
      try {
        f.block().loop();
        f.localGet(hi).localGet(v).i32Sub().i32Const(LANES).i32LtS().brIf(1);
        this.stmts(s.body, true);
        f.localGet(v).i32Const(LANES).i32Add().localSet(v).br(0);
        f.end().end();
        this.vectorized++;
      } catch (e) {
        if (!(e instanceof NoVector)) throw e;
        f.code.length = mark; // the scalar loop alone (locals made meanwhile stay unused)
      } finally {
        this.vnames = undefined;
        this.vloop = undefined;
      }
    }
    f.block().loop();
    f.localGet(v).localGet(hi).i32GeS().brIf(1);
    this.stmts(s.body, false);
    f.localGet(v).i32Const(1).i32Add().localSet(v).br(0);
    f.end().end();
  }
}

/** One kernel rendered: its function and how many of its loops run four lanes. */
export interface RenderedKernel {
  readonly fn: Fn;
  readonly vectorized: number;
}

/** Renders one scheduled kernel (throws UnsupportedError for what wasm does not compute). */
export function renderWasmKernel(
  sk: ScheduledKernel,
  simd = true,
  declineOp?: string,
): RenderedKernel {
  const em = new KernelEmitter(sk, simd, declineOp);
  const fn = em.emit();
  return { fn, vectorized: em.vectorized };
}

/** The kernels of one program in one module: identical kernels share one function. */
export class WasmProgramModule {
  readonly builder = new ModuleBuilder();
  private readonly byBytes = new Map<string, string>();
  /** Loops vectorized over all distinct kernels (for logs and tests). */
  vectorizedLoops = 0;

  constructor(
    readonly simd = true,
    /** An opcode to refuse (a test seam: wasmTesting.decline). */
    readonly declineOp?: string,
    /**
     * Import a shared memory (threads.ts: wherever the engine has one, at every thread count;
     * declared up to 2 GiB, the most a plan lays out, so one module fits any memory).
     */
    shared = false,
  ) {
    if (shared) this.builder.importMemory(0, 32768, true);
    else this.builder.importMemory(0);
  }

  /** The export name of `sk`'s function (added unless an identical one is there). */
  add(sk: ScheduledKernel): string {
    const r = renderWasmKernel(sk, this.simd, this.declineOp);
    const key = `${r.fn.params.length}:${r.fn.localDecls().join(",")}:${r.fn.code.join(",")}`;
    const known = this.byBytes.get(key);
    if (known !== undefined) return known;
    const name = `k${this.byBytes.size}`;
    this.builder.addFunction(r.fn, name);
    this.byBytes.set(key, name);
    this.vectorizedLoops += r.vectorized;
    return name;
  }

  get kernels(): number {
    return this.byBytes.size;
  }

  encode(): Uint8Array {
    return this.builder.encode();
  }
}

export { f32Bits };
