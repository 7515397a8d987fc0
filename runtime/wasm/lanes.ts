// Lane expressions: a tiny expression builder over one wasm function that emits the same
// computation either on scalars (f32 / i32) or on four lanes (v128 as f32x4 / i32x4), so every
// element op and every polynomial of math.ts is written once and used by both the scalar loops
// and the SIMD128 loops of render_wasm.ts. Three kinds of value: `f` (f32 lanes), `i` (i32
// lanes) and `m` (a mask: an i32 0/1 as a scalar — exactly a pred — or all-ones/all-zeros
// lanes). An expression is emitted where it is used; `let` binds one to a local (emitted at
// once), which is how shared subexpressions are computed once.

import type { Fn } from "./encode.ts";

/** f32 lanes, i32 lanes, a mask, or (scalar only) an i64 value (s64 elements). */
export type Kind = "f" | "i" | "m" | "l";

export interface E {
  readonly kind: Kind;
  emit(): void;
}

/** Thrown by an operation the lanes cannot express (the caller keeps the scalar loop). */
export class NoVector extends Error {
  constructor(what: string) {
    super(`not vectorized: ${what}`);
  }
}

const bitsBuf = new DataView(new ArrayBuffer(4));

/** The bits of an f32 value. */
export function f32Bits(x: number): number {
  bitsBuf.setFloat32(0, x, true);
  return bitsBuf.getUint32(0, true);
}

/** A C99 hexadecimal float literal ("0x1.62ep-1", "-0x1.8p23") as a number. */
export function hexf(s: string): number {
  const m = /^(-?)0x([0-9a-f]+)(?:\.([0-9a-f]*))?p([+-]?\d+)$/i.exec(s);
  if (!m) throw new Error(`not a hex float: ${s}`);
  const frac = m[3] ?? "";
  const mant = parseInt(m[2]! + frac, 16);
  const v = mant * 2 ** (Number(m[4]) - 4 * frac.length);
  return m[1] === "-" ? -v : v;
}

export class Lanes {
  constructor(
    readonly fn: Fn,
    readonly simd: boolean,
  ) {}

  private mk(kind: Kind, emit: () => void): E {
    return { kind, emit };
  }

  private need(e: E, kind: Kind, op: string): void {
    if (e.kind !== kind) throw new Error(`lanes: ${op} of a ${e.kind} value, expected ${kind}`);
  }

  /** An f32 constant (splat in SIMD). */
  f(v: number): E {
    return this.mk("f", () => {
      if (this.simd) this.fn.v128Const([v, v, v, v]);
      else this.fn.f32Const(v);
    });
  }

  /** An i32 constant (splat in SIMD). */
  i(v: number): E {
    return this.mk("i", () => {
      if (this.simd) this.fn.v128Const([v, v, v, v], true);
      else this.fn.i32Const(v);
    });
  }

  /** A mask constant. */
  m(on: boolean): E {
    return this.mk("m", () => {
      if (this.simd) this.fn.v128Const(on ? [-1, -1, -1, -1] : [0, 0, 0, 0], true);
      else this.fn.i32Const(on ? 1 : 0);
    });
  }

  /** The value of a local of this lane shape. */
  get(local: number, kind: Kind): E {
    return this.mk(kind, () => this.fn.localGet(local));
  }

  /** A local for a value of `kind` in this lane shape. */
  local(kind: Kind): number {
    if (kind === "l" && this.simd) throw new NoVector("an s64 value");
    return this.fn.local(this.simd ? "v128" : kind === "f" ? "f32" : kind === "l" ? "i64" : "i32");
  }

  /** Computes `e` now into a new local; the result reads it. */
  let(e: E): E {
    const l = this.local(e.kind);
    e.emit();
    this.fn.localSet(l);
    return this.get(l, e.kind);
  }

  /** A value emitted by raw code (already on the stack when `emit` runs). */
  raw(kind: Kind, emit: () => void): E {
    return this.mk(kind, emit);
  }

  private f2(a: E, b: E, op: string, scalar: () => void, simd: () => void): E {
    this.need(a, "f", op);
    this.need(b, "f", op);
    return this.mk("f", () => {
      a.emit();
      b.emit();
      (this.simd ? simd : scalar)();
    });
  }

  private f1(a: E, op: string, scalar: () => void, simd: () => void): E {
    this.need(a, "f", op);
    return this.mk("f", () => {
      a.emit();
      (this.simd ? simd : scalar)();
    });
  }

  add(a: E, b: E): E {
    return this.f2(a, b, "add", () => this.fn.f32Add(), () => this.fn.f32x4Add());
  }
  sub(a: E, b: E): E {
    return this.f2(a, b, "sub", () => this.fn.f32Sub(), () => this.fn.f32x4Sub());
  }
  mul(a: E, b: E): E {
    return this.f2(a, b, "mul", () => this.fn.f32Mul(), () => this.fn.f32x4Mul());
  }
  div(a: E, b: E): E {
    return this.f2(a, b, "div", () => this.fn.f32Div(), () => this.fn.f32x4Div());
  }
  abs(a: E): E {
    return this.f1(a, "abs", () => this.fn.f32Abs(), () => this.fn.f32x4Abs());
  }
  neg(a: E): E {
    return this.f1(a, "neg", () => this.fn.f32Neg(), () => this.fn.f32x4Neg());
  }
  sqrt(a: E): E {
    return this.f1(a, "sqrt", () => this.fn.f32Sqrt(), () => this.fn.f32x4Sqrt());
  }
  floor(a: E): E {
    return this.f1(a, "floor", () => this.fn.f32Floor(), () => this.fn.f32x4Floor());
  }
  ceil(a: E): E {
    return this.f1(a, "ceil", () => this.fn.f32Ceil(), () => this.fn.f32x4Ceil());
  }
  trunc(a: E): E {
    return this.f1(a, "trunc", () => this.fn.f32Trunc(), () => this.fn.f32x4Trunc());
  }
  nearest(a: E): E {
    return this.f1(a, "nearest", () => this.fn.f32Nearest(), () => this.fn.f32x4Nearest());
  }
  /** |a| with the sign of b. */
  copysign(a: E, b: E): E {
    if (!this.simd) return this.f2(a, b, "copysign", () => this.fn.f32Copysign(), () => {});
    return this.fromBits(this.or(this.and(this.bits(a), this.i(0x7fffffff)),
      this.and(this.bits(b), this.i(0x80000000 | 0))));
  }

  private cmp(a: E, b: E, op: string, scalar: () => void, simd: () => void): E {
    this.need(a, "f", op);
    this.need(b, "f", op);
    return this.mk("m", () => {
      a.emit();
      b.emit();
      (this.simd ? simd : scalar)();
    });
  }
  lt(a: E, b: E): E {
    return this.cmp(a, b, "lt", () => this.fn.f32Lt(), () => this.fn.f32x4Lt());
  }
  gt(a: E, b: E): E {
    return this.cmp(a, b, "gt", () => this.fn.f32Gt(), () => this.fn.f32x4Gt());
  }
  le(a: E, b: E): E {
    return this.cmp(a, b, "le", () => this.fn.f32Le(), () => this.fn.f32x4Le());
  }
  ge(a: E, b: E): E {
    return this.cmp(a, b, "ge", () => this.fn.f32Ge(), () => this.fn.f32x4Ge());
  }
  eq(a: E, b: E): E {
    return this.cmp(a, b, "eq", () => this.fn.f32Eq(), () => this.fn.f32x4Eq());
  }
  ne(a: E, b: E): E {
    return this.cmp(a, b, "ne", () => this.fn.f32Ne(), () => this.fn.f32x4Ne());
  }
  isNan(a: E): E {
    return this.ne(a, a);
  }

  /** Signed i32 comparisons (a mask). */
  icmp(a: E, b: E, rel: "lt" | "gt" | "le" | "ge" | "eq" | "ne" | "geu"): E {
    this.need(a, "i", "icmp");
    this.need(b, "i", "icmp");
    if (this.simd && rel === "geu") throw new NoVector("unsigned i32 compare");
    return this.mk("m", () => {
      a.emit();
      b.emit();
      const f = this.fn;
      if (this.simd) {
        ({ lt: () => f.i32x4LtS(), gt: () => f.i32x4GtS(), le: () => f.i32x4LeS(),
          ge: () => f.i32x4GeS(), eq: () => f.i32x4Eq(), ne: () => f.i32x4Ne(),
          geu: () => f })[rel]();
      } else {
        ({ lt: () => f.i32LtS(), gt: () => f.i32GtS(), le: () => f.i32LeS(),
          ge: () => f.i32GeS(), eq: () => f.i32Eq(), ne: () => f.i32Ne(),
          geu: () => f.i32GeU() })[rel]();
      }
    });
  }

  /** m ? a : b, lane by lane (both sides are computed). */
  sel(m: E, a: E, b: E): E {
    this.need(m, "m", "sel");
    if (a.kind !== b.kind) throw new Error(`lanes: sel of ${a.kind} and ${b.kind}`);
    return this.mk(a.kind, () => {
      a.emit();
      b.emit();
      m.emit();
      if (this.simd) this.fn.v128Bitselect();
      else this.fn.select();
    });
  }

  /** The bits of f32 lanes as i32 lanes. */
  bits(a: E): E {
    this.need(a, "f", "bits");
    return this.mk("i", () => {
      a.emit();
      if (!this.simd) this.fn.i32ReinterpretF32();
    });
  }

  /** i32 lanes as the f32 lanes of the same bits. */
  fromBits(a: E): E {
    this.need(a, "i", "fromBits");
    return this.mk("f", () => {
      a.emit();
      if (!this.simd) this.fn.f32ReinterpretI32();
    });
  }

  /** i32 lanes converted to f32 (round to nearest). */
  toFloat(a: E): E {
    this.need(a, "i", "toFloat");
    return this.mk("f", () => {
      a.emit();
      if (this.simd) this.fn.f32x4ConvertI32x4S();
      else this.fn.f32ConvertI32S();
    });
  }

  /** f32 lanes truncated to i32, saturating, NaN to 0. */
  toInt(a: E): E {
    this.need(a, "f", "toInt");
    return this.mk("i", () => {
      a.emit();
      if (this.simd) this.fn.i32x4TruncSatF32x4S();
      else this.fn.i32TruncSatF32S();
    });
  }

  private i2(a: E, b: E, op: string, scalar: () => void, simd: () => void): E {
    if (a.kind === "f" || b.kind === "f" || a.kind !== b.kind) {
      throw new Error(`lanes: ${op} of ${a.kind} and ${b.kind}`);
    }
    return this.mk(a.kind, () => {
      a.emit();
      b.emit();
      (this.simd ? simd : scalar)();
    });
  }

  iadd(a: E, b: E): E {
    return this.i2(a, b, "iadd", () => this.fn.i32Add(), () => this.fn.i32x4Add());
  }
  isub(a: E, b: E): E {
    return this.i2(a, b, "isub", () => this.fn.i32Sub(), () => this.fn.i32x4Sub());
  }
  imin(a: E, b: E): E {
    if (!this.simd) return this.sel(this.icmp(a, b, "lt"), a, b);
    return this.i2(a, b, "imin", () => {}, () => this.fn.i32x4MinS());
  }
  /** Bitwise and / or / xor of i32 lanes or masks. */
  and(a: E, b: E): E {
    return this.i2(a, b, "and", () => this.fn.i32And(), () => this.fn.v128And());
  }
  or(a: E, b: E): E {
    return this.i2(a, b, "or", () => this.fn.i32Or(), () => this.fn.v128Or());
  }
  xor(a: E, b: E): E {
    return this.i2(a, b, "xor", () => this.fn.i32Xor(), () => this.fn.v128Xor());
  }
  /** The complement of a mask. */
  not(m: E): E {
    this.need(m, "m", "not");
    return this.mk("m", () => {
      m.emit();
      if (this.simd) this.fn.v128Not();
      else this.fn.i32Eqz();
    });
  }

  private shift(a: E, n: number, scalar: () => void, simd: () => void): E {
    this.need(a, "i", "shift");
    return this.mk("i", () => {
      a.emit();
      this.fn.i32Const(n);
      (this.simd ? simd : scalar)();
    });
  }
  shl(a: E, n: number): E {
    return this.shift(a, n, () => this.fn.i32Shl(), () => this.fn.i32x4Shl());
  }
  shrS(a: E, n: number): E {
    return this.shift(a, n, () => this.fn.i32ShrS(), () => this.fn.i32x4ShrS());
  }
  shrU(a: E, n: number): E {
    return this.shift(a, n, () => this.fn.i32ShrU(), () => this.fn.i32x4ShrU());
  }

  /** A mask as a pred value (scalar: it is one; SIMD: kept as the mask). */
  /** A mask as f32 0/1. */
  maskToFloat(m: E): E {
    this.need(m, "m", "maskToFloat");
    if (this.simd) return this.fromBits(this.and({ kind: "i", emit: m.emit }, this.i(f32Bits(1))));
    return this.toFloat({ kind: "i", emit: m.emit });
  }

  /** A mask's lanes as i32 (scalar 0/1; SIMD -1/0). */
  maskBits(m: E): E {
    this.need(m, "m", "maskBits");
    return { kind: "i", emit: m.emit };
  }
}
