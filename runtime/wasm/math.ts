// Transcendental f32 functions for the wasm backend, as lane expressions (lanes.ts): the same
// algorithms, constants and operation order as the native backend's runtime/native/csrc/
// kiln_math.h (its portable, non-FMA build: wasm f32 arithmetic is IEEE single precision, one
// rounding per op), so their error is the one measured there over all 2^32 inputs and they
// run in the tolerance tier (runtime/tiers.ts TRANSCENDENTAL_ULPS). Branch-free: both sides of
// every select are computed, so each function works on four lanes as well as on one.
//
// The functions native takes from libm (pow, sin, cos, tan, atan2, cbrt, fmod) are scalar f64
// code written straight to the encoder below: each computes in f64 well below an f32 ulp and
// rounds once, as the evaluator's double function rounded to f32 does.

import type { Fn } from "./encode.ts";
import { type E, f32Bits, hexf, type Lanes } from "./lanes.ts";

const LN2_HI = hexf("0x1.62ep-1");
const LN2_LO = hexf("0x1.0bfbe8p-15");
const LOG2E = hexf("0x1.715476p+0");
const SHIFT = hexf("0x1.8p23");
const INF = Number.POSITIVE_INFINITY;

/** Horner: ((c0 r + c1) r + c2) ... */
function horner(L: Lanes, r: E, cs: readonly string[]): E {
  let p = L.let(L.f(hexf(cs[0]!)));
  for (let k = 1; k < cs.length; k++) p = L.let(L.add(L.mul(p, r), L.f(hexf(cs[k]!))));
  return p;
}

/** e^r - 1 on |r| <= ln2/2: r + r^2 P(r). */
function expPoly(L: Lanes, r: E): E {
  const p = horner(L, r, ["0x1.6b6df8p-10", "0x1.123094p-7", "0x1.55568ap-5", "0x1.5554a2p-3",
    "0x1p-1"]);
  return L.let(L.add(r, L.mul(L.mul(r, r), p)));
}

/** n, the reduced r and the i32 n of x = n ln2 + r. */
function reduce(L: Lanes, x: E): { n: E; r: E; ni: E } {
  const z = L.let(L.add(L.mul(x, L.f(LOG2E)), L.f(SHIFT)));
  const n = L.let(L.sub(z, L.f(SHIFT)));
  let r = L.let(L.sub(x, L.mul(n, L.f(LN2_HI))));
  r = L.let(L.sub(r, L.mul(n, L.f(LN2_LO))));
  const ni = L.let(L.isub(L.bits(z), L.i(f32Bits(SHIFT))));
  return { n, r, ni };
}

/** 2^k as f32 for an i32 k in the normal range. */
function pow2(L: Lanes, k: E): E {
  return L.fromBits(L.shl(L.iadd(k, L.i(127)), 23));
}

function expCore(L: Lanes, x: E): E {
  const { r, ni } = reduce(L, x);
  const q = expPoly(L, r);
  const n1 = L.let(L.shrS(ni, 1));
  const n2 = L.let(L.isub(ni, n1));
  const s1 = L.let(pow2(L, n1));
  const s2 = pow2(L, n2);
  return L.mul(L.add(s1, L.mul(s1, q)), s2);
}

export function expf(L: Lanes, x0: E): E {
  let x = L.let(L.sel(L.gt(x0, L.f(89)), L.f(89), x0));
  x = L.let(L.sel(L.lt(x, L.f(-104)), L.f(-104), x));
  return expCore(L, x);
}

function expm1Poly(L: Lanes, r: E): E {
  const p = horner(L, r, ["0x1.9e7d0cp-13", "0x1.6d3a84p-10", "0x1.1112d4p-7", "0x1.5554f8p-5",
    "0x1.555554p-3", "0x1p-1"]);
  return L.let(L.add(r, L.mul(L.mul(r, r), p)));
}

export function expm1f(L: Lanes, x: E): E {
  let c = L.let(L.sel(L.gt(x, L.f(89)), L.f(89), x));
  c = L.let(L.sel(L.lt(c, L.f(-30)), L.f(-30), c));
  const { r, ni } = reduce(L, c);
  const p = expm1Poly(L, r);
  const t = L.let(pow2(L, L.isub(ni, L.i(1))));
  const y = L.let(L.mul(L.f(2), L.add(L.mul(p, t), L.sub(t, L.f(0.5)))));
  return L.sel(L.lt(L.abs(x), L.f(2 ** -25)), x, y);
}

function log1pPoly(L: Lanes, f: E): E {
  return horner(L, f, ["-0x1.38ebc0p-4", "0x1.056feap-3", "-0x1.0d846ap-3", "0x1.22d712p-3",
    "-0x1.547212p-3", "0x1.99a02cp-3", "-0x1.000228p-2", "0x1.555554p-2", "-0x1p-1"]);
}

function logTail(L: Lanes, k: E, f: E): E {
  const q = log1pPoly(L, f);
  const r = L.let(L.add(f, L.add(L.mul(L.mul(f, f), q), L.mul(k, L.f(LN2_LO)))));
  return L.add(L.mul(k, L.f(LN2_HI)), r);
}

export function logf(L: Lanes, x: E): E {
  const sub = L.let(L.lt(x, L.f(2 ** -126)));
  const xs = L.let(L.sel(sub, L.mul(x, L.f(2 ** 23)), x));
  const ix = L.let(L.bits(xs));
  const k = L.let(L.shrS(L.isub(ix, L.i(0x3f3504f3)), 23));
  const m = L.let(L.fromBits(L.isub(ix, L.shl(k, 23))));
  const kf = L.let(L.sub(L.toFloat(k), L.sel(sub, L.f(23), L.f(0))));
  let y = L.let(logTail(L, kf, L.sub(m, L.f(1))));
  y = L.let(L.sel(L.eq(x, L.f(0)), L.f(-INF), y));
  y = L.let(L.sel(L.lt(x, L.f(0)), L.f(NaN), y));
  y = L.let(L.sel(L.eq(x, L.f(INF)), x, y));
  return L.sel(L.isNan(x), x, y);
}

export function log1pf(L: Lanes, x: E): E {
  const big = L.let(L.ge(x, L.f(2 ** 24)));
  const v = L.let(L.sel(big, x, L.add(L.f(1), x)));
  const iv = L.let(L.bits(v));
  const k = L.let(L.shrS(L.isub(iv, L.i(0x3f3504f3)), 23));
  const kc = L.let(L.imin(k, L.i(24)));
  const scale = L.let(L.fromBits(L.shl(L.isub(L.i(127), kc), 23)));
  const a = L.let(L.sub(scale, L.f(1)));
  const b = L.let(L.mul(x, scale));
  const fs = L.let(L.add(a, b));
  const bb = L.let(L.sub(fs, a));
  const e = L.let(L.add(L.sub(a, L.sub(fs, bb)), L.sub(b, bb)));
  const fb = L.let(L.sub(L.fromBits(L.isub(iv, L.shl(k, 23))), L.f(1)));
  const f = L.let(L.sel(big, fb, fs));
  const c = L.let(L.sel(big, L.f(0), e));
  const kf = L.let(L.toFloat(k));
  const q = log1pPoly(L, f);
  const r = L.let(L.add(f, L.add(L.mul(L.mul(f, f), q),
    L.add(L.mul(kf, L.f(LN2_LO)), L.sub(c, L.mul(c, f))))));
  let y = L.let(L.add(L.mul(kf, L.f(LN2_HI)), r));
  y = L.let(L.sel(L.eq(x, L.f(-1)), L.f(-INF), y));
  y = L.let(L.sel(L.lt(x, L.f(-1)), L.f(NaN), y));
  y = L.let(L.sel(L.eq(x, L.f(INF)), x, y));
  y = L.let(L.sel(L.eq(x, L.f(0)), x, y));
  return L.sel(L.isNan(x), x, y);
}

/** e^x = s (1 + q), s = 2^n exact: q and s (x in [-87, 89]). */
function expParts(L: Lanes, x: E): { q: E; s: E } {
  const { r, ni } = reduce(L, x);
  const s = L.let(pow2(L, ni));
  return { q: expPoly(L, r), s };
}

export function tanhf(L: Lanes, x: E): E {
  const ax = L.let(L.abs(x));
  const x2 = L.let(L.mul(ax, ax));
  const p = horner(L, x2, ["-0x1.995aeap-8", "0x1.58ecf8p-6", "-0x1.b91f26p-5",
    "0x1.110cf0p-3", "-0x1.55554ap-2"]);
  const ys = L.let(L.add(ax, L.mul(L.mul(ax, x2), p)));
  const a2 = L.let(L.sel(L.gt(ax, L.f(10)), L.f(20), L.mul(L.f(2), ax)));
  const { q, s } = expParts(L, a2);
  const yl = L.let(L.sub(L.f(1), L.div(L.f(2), L.add(L.add(s, L.f(1)), L.mul(s, q)))));
  let y = L.let(L.sel(L.lt(ax, L.f(0.55)), ys, yl));
  y = L.let(L.sel(L.gt(ax, L.f(10)), L.f(1), y));
  return L.sel(L.isNan(x), x, L.copysign(y, x));
}

export function logisticf(L: Lanes, x: E): E {
  const xc = L.let(L.sel(L.lt(x, L.f(-104)), L.f(-104), L.sel(L.gt(x, L.f(64)), L.f(64), x)));
  const nx = L.let(L.neg(xc));
  const { r, ni } = reduce(L, nx);
  const q = expPoly(L, r);
  const u24 = L.let(L.fromBits(L.shl(L.isub(L.i(151), ni), 23)));
  const u = L.let(L.mul(u24, L.f(2 ** -24)));
  const s = L.let(L.add(L.f(1), u));
  const den = L.let(L.add(s, L.add(q, L.sub(u, L.sub(s, L.f(1))))));
  return L.mul(L.div(u24, den), L.f(2 ** -24));
}

export function erff(L: Lanes, x: E): E {
  const ax = L.let(L.abs(x));
  const s = L.let(L.mul(ax, ax));
  const p = horner(L, s, ["0x1.4f38b0p-14", "-0x1.a600b6p-11", "0x1.544980p-8",
    "-0x1.b80114p-6", "0x1.ce2d64p-4", "-0x1.812740p-2", "0x1.06eba8p-3"]);
  const ys = L.let(L.add(ax, L.mul(ax, p)));
  const lo = 0.921875;
  const am = L.let(L.sel(L.lt(ax, L.f(lo)), L.f(lo), L.sel(L.gt(ax, L.f(3.93)), L.f(3.93), ax)));
  const t = L.let(L.sub(am, L.f(lo)));
  const q = horner(L, t, ["0x1.1cdb3ep-13", "-0x1.bd00d8p-12", "-0x1.e7ab1cp-11",
    "0x1.45813ep-7", "-0x1.6caa0ap-5", "-0x1.aa8278p-1", "-0x1.41068cp+1", "-0x1.a60826p+0"]);
  const { q: eq, s: e } = expParts(L, q);
  const ym = L.let(L.sub(L.sub(L.f(1), e), L.mul(e, eq)));
  let y = L.let(L.sel(L.lt(ax, L.f(lo)), ys, ym));
  y = L.let(L.sel(L.gt(ax, L.f(3.93)), L.f(1), y));
  return L.copysign(y, x);
}

// ---- power: f64 code (scalar) --------------------------------------------------------------

const LN2_HI_D = 6.93147180369123816490e-1; // fdlibm's ln2 split: n * LN2_HI_D is exact
const LN2_LO_D = 1.90821492927058770002e-10;

/** Pushes log(x) of the f64 in local `x` (x >= 0, or NaN): the atanh series on [√½, √2). */
function log64(f: Fn, x: number): void {
  const k = f.local("i64");
  const m = f.local("f64");
  const s = f.local("f64");
  const z = f.local("f64");
  const kd = f.local("f64");
  // x = 2^k m, m in [sqrt(1/2), sqrt(2))
  f.localGet(x).i64ReinterpretF64().i64Const(0x3fe6a09e667f3bcdn).i64Sub().i64Const(52n)
    .i64ShrS().localSet(k);
  f.localGet(x).i64ReinterpretF64().localGet(k).i64Const(52n).i64Shl().i64Sub()
    .f64ReinterpretI64().localSet(m);
  f.localGet(k).f64ConvertI64S().localSet(kd);
  // s = (m - 1) / (m + 1); log m = 2 atanh s = s (2 + z (2/3 + z (2/5 + ...))), z = s^2
  f.localGet(m).f64Const(1).f64Sub().localGet(m).f64Const(1).f64Add().f64Div().localSet(s);
  f.localGet(s).localGet(s).f64Mul().localSet(z);
  f.f64Const(2 / 19);
  for (const d of [17, 15, 13, 11, 9, 7, 5, 3]) f.localGet(z).f64Mul().f64Const(2 / d).f64Add();
  f.localGet(z).f64Mul().f64Const(2).f64Add().localGet(s).f64Mul();
  f.localGet(kd).f64Const(LN2_LO_D).f64Mul().f64Add();
  f.localGet(kd).f64Const(LN2_HI_D).f64Mul().f64Add();
  // log 0 = -inf, log inf = inf, NaN stays
  const r = f.local("f64");
  f.localSet(r);
  f.f64Const(-Infinity).localGet(r).localGet(x).f64Const(0).f64Eq().select().localSet(r);
  f.localGet(x).localGet(r).localGet(x).f64Const(Infinity).f64Eq().select().localSet(r);
  f.localGet(x).localGet(r).localGet(x).localGet(x).f64Ne().select();
}

/** Pushes e^t of the f64 in local `t`: Cody-Waite by ln 2, Taylor to r^13, 2^n in two steps. */
function exp64(f: Fn, t: number): void {
  const tc = f.local("f64");
  const n = f.local("f64");
  const r = f.local("f64");
  const ni = f.local("i64");
  const n1 = f.local("i64");
  // clamp to [-1100, 1100] (NaN stays NaN: wasm min/max propagate it)
  f.localGet(t).f64Const(1100).f64Min().f64Const(-1100).f64Max().localSet(tc);
  f.localGet(tc).f64Const(Math.LOG2E).f64Mul().f64Nearest().localSet(n);
  f.localGet(tc).localGet(n).f64Const(LN2_HI_D).f64Mul().f64Sub();
  f.localGet(n).f64Const(LN2_LO_D).f64Mul().f64Sub().localSet(r);
  let fact = 1;
  const coef: number[] = [];
  for (let i = 0; i <= 13; i++) {
    if (i > 0) fact *= i;
    coef.push(1 / fact);
  }
  f.f64Const(coef[13]!);
  for (let i = 12; i >= 0; i--) f.localGet(r).f64Mul().f64Const(coef[i]!).f64Add();
  f.localGet(n).i64TruncSatF64S().localSet(ni);
  f.localGet(ni).i64Const(1n).i64ShrS().localSet(n1);
  // * 2^n1 * 2^(n - n1), each a normal f64
  f.localGet(n1).i64Const(1023n).i64Add().i64Const(52n).i64Shl().f64ReinterpretI64().f64Mul();
  f.localGet(ni).localGet(n1).i64Sub().i64Const(1023n).i64Add().i64Const(52n).i64Shl()
    .f64ReinterpretI64().f64Mul();
}

/**
 * Pushes pow(a, b) of the f32 locals a and b as f32: |a|^b = e^(b log|a|) in f64 (relative
 * error ~1e-14 where the f32 result is finite), rounded once to f32; negative for an odd
 * integer power of a base with the sign bit set, NaN for a finite negative base and a
 * non-integer exponent, and the evaluator's powF overrides (1^y = x^0 = 1, (-1)^±inf = 1).
 * Zeros and infinities come out of the same formula (log 0 = -inf, log inf = inf; e^±inf =
 * inf, 0), as JavaScript's Math.pow has them.
 */
export function powf(f: Fn, a: number, b: number): void {
  const ad = f.local("f64");
  const lg = f.local("f64");
  const t = f.local("f64");
  const r = f.local("f32");
  const isInt = f.local("i32");
  const odd = f.local("i32");
  f.localGet(a).f64PromoteF32().f64Abs().localSet(ad);
  log64(f, ad);
  f.localSet(lg);
  f.localGet(b).f64PromoteF32().localGet(lg).f64Mul().localSet(t);
  exp64(f, t);
  f.f32DemoteF64().localSet(r);
  // b is an integer (infinities count as even ones); odd when b/2 is not one
  f.localGet(b).f32Trunc().localGet(b).f32Eq().localSet(isInt);
  f.localGet(b).f32Const(0.5).f32Mul().f32Trunc().f32Const(2).f32Mul().localGet(b).f32Ne()
    .localGet(isInt).i32And().localSet(odd);
  // r = -r where a's sign bit is set and b is odd
  f.localGet(r).f32Neg().localGet(r);
  f.localGet(a).i32ReinterpretF32().i32Const(0).i32LtS().localGet(odd).i32And();
  f.select().localSet(r);
  // NaN for a finite negative a and a non-integer b
  f.f32Bits(0x7fc00000).localGet(r);
  f.localGet(a).f32Const(0).f32Lt().localGet(a).f32Const(-Infinity).f32Ne().i32And()
    .localGet(isInt).i32Eqz().i32And();
  f.select().localSet(r);
  // 1^y = x^0 = 1; (-1)^±inf = 1
  f.f32Const(1).localGet(r);
  f.localGet(a).f32Const(1).f32Eq().localGet(b).f32Const(0).f32Eq().i32Or();
  f.localGet(a).f32Const(-1).f32Eq().localGet(b).f32Abs().f32Const(Infinity).f32Eq().i32And()
    .i32Or();
  f.select();
}

/**
 * Pushes cbrt(x) of the f32 local x as f32: e^(log|x| / 3) in f64 (relative error ~1e-15),
 * rounded once, with x's sign; ±0, ±inf and NaN come out of the same formula.
 */
export function cbrtf(f: Fn, x: number): void {
  const ad = f.local("f64");
  const lg = f.local("f64");
  f.localGet(x).f64PromoteF32().f64Abs().localSet(ad);
  log64(f, ad);
  f.f64Const(1 / 3).f64Mul().localSet(lg);
  exp64(f, lg);
  f.f32DemoteF64().localGet(x).f32Copysign();
}

// ---- sine, cosine, tangent: f64 code (scalar) ----------------------------------------------

/** π · 2^bits (truncated), by Machin's formula π = 16 atan(1/5) - 4 atan(1/239). */
function piScaled(bits: bigint): bigint {
  const atanInv = (x: bigint): bigint => {
    const one = 1n << bits;
    let term = one / x;
    let sum = term;
    const x2 = x * x;
    for (let k = 1n; term !== 0n; k++) {
      term /= x2;
      sum += (k & 1n ? -term : term) / (2n * k + 1n);
    }
    return sum;
  };
  return 16n * atanInv(5n) - 4n * atanInv(239n);
}

/** 2/π as 24-bit chunks: 2/π = Σ c_j 2^(-24 (j + 1)) (c_0 = 0xa2f983). */
export const TWO_OVER_PI_CHUNKS: readonly number[] = (() => {
  const n = 10;
  const guard = 64n;
  const k = BigInt(24 * n) + guard;
  const t = (2n << (BigInt(24 * n) + k)) / piScaled(k); // 2/π · 2^(24 n)
  return Array.from({ length: n }, (_, j) => Number((t >> BigInt(24 * (n - 1 - j))) & 0xffffffn));
})();

// fdlibm's π/2 in three 33-bit parts and the rest: n * PIO2_1 and n * PIO2_2 are exact for
// |n| < 2^20.
const PIO2_1 = 1.57079632673412561417e+0;
const PIO2_2 = 6.07710050630396597660e-11;
const PIO2_3 = 2.02226624871116645580e-21;
const PIO2 = Math.PI / 2;
const MEDIUM = 1e6;

/**
 * x reduced by multiples of π/2 for the f32 local x: sets the f64 local r (|r| <= π/4 and a
 * bit) and the i32 local q (the multiple mod 4), so that x = q π/2 + r. Below 1e6: Cody-Waite
 * with π/2 in three parts. Above: Payne-Hanek — x = M 2^E (M the 24-bit significand) times 2/π
 * mod 4, from the six 24-bit chunks of 2/π that matter (earlier chunks give multiples of 4,
 * later ones less than 2^-95), summed as a double-double, so r is accurate to far below an
 * f32 ulp even where x lies within 2^-30 of a multiple of π/2. For a negative x the large
 * path reduces |x| and negates r and q.
 */
function reducePio2(f: Fn, x: number, r: number, q: number): void {
  const xd = f.local("f64");
  const n = f.local("f64");
  f.localGet(x).f64PromoteF32().localSet(xd);
  f.localGet(x).f32Abs().f32Const(MEDIUM).f32Lt();
  f.if();
  {
    f.localGet(xd).f64Const(2 / Math.PI).f64Mul().f64Nearest().localSet(n);
    f.localGet(xd).localGet(n).f64Const(PIO2_1).f64Mul().f64Sub();
    f.localGet(n).f64Const(PIO2_2).f64Mul().f64Sub();
    f.localGet(n).f64Const(PIO2_3).f64Mul().f64Sub().localSet(r);
    // n = 0: r is x itself (keeps the sign of a zero)
    f.localGet(xd).localGet(r).localGet(n).f64Const(0).f64Eq().select().localSet(r);
    f.localGet(n).i64TruncSatF64S().i32WrapI64().i32Const(3).i32And().localSet(q);
  }
  f.else();
  {
    const bits = f.local("i32");
    const e = f.local("i32");
    const j0 = f.local("i32");
    const m = f.local("f64");
    const scale = f.local("f64");
    const hi = f.local("f64");
    const lo = f.local("f64");
    const a = f.local("f64");
    const s = f.local("f64");
    const bb = f.local("f64");
    f.localGet(x).i32ReinterpretF32().localSet(bits);
    // E = biased exponent - 150 (in [-4, 104] here); M = significand with the hidden bit
    f.localGet(bits).i32Const(23).i32ShrU().i32Const(0xff).i32And().i32Const(150).i32Sub()
      .localSet(e);
    f.localGet(bits).i32Const(0x7fffff).i32And().i32Const(0x800000).i32Or().f64ConvertI32S()
      .localSet(m);
    // j0 = max(0, floor((E - 26) / 24) + 1): the first chunk whose term is not a multiple of 4
    f.localGet(e).i32Const(24 * 8 - 26).i32Add().i32Const(24).i32DivS().i32Const(7).i32Sub()
      .localSet(j0);
    f.i32Const(0).localGet(j0).localGet(j0).i32Const(0).i32LtS().select().localSet(j0);
    // scale = 2^(E - 24 (j0 + 1)), exact (the exponent is in [-52, 1])
    f.localGet(e).localGet(j0).i32Const(24).i32Mul().i32Sub().i32Const(24).i32Sub()
      .i32Const(1023).i32Add().i64ExtendI32S().i64Const(52n).i64Shl().f64ReinterpretI64()
      .localSet(scale);
    f.f64Const(0).localSet(hi);
    f.f64Const(0).localSet(lo);
    for (let k = 0; k < 6; k++) {
      // a = M * c[j0 + k] * scale * 2^(-24 k): exact (48-bit product, power-of-two scale)
      const c = f.local("f64");
      f.f64Const(TWO_OVER_PI_CHUNKS[k]!).localSet(c);
      for (let j = 1; j <= 4; j++) {
        f.f64Const(TWO_OVER_PI_CHUNKS[j + k]!).localGet(c).localGet(j0).i32Const(j).i32Eq()
          .select().localSet(c);
      }
      f.localGet(m).localGet(c).f64Mul().localGet(scale).f64Mul().f64Const(2 ** (-24 * k))
        .f64Mul().localSet(a);
      if (k === 0) {
        // the first term mod 8 (exact): a - 8 floor(a / 8)
        f.localGet(a).localGet(a).f64Const(0.125).f64Mul().f64Floor().f64Const(8).f64Mul()
          .f64Sub().localSet(hi);
        continue;
      }
      // (hi, lo) += a: TwoSum
      f.localGet(hi).localGet(a).f64Add().localSet(s);
      f.localGet(s).localGet(hi).f64Sub().localSet(bb);
      f.localGet(hi).localGet(s).localGet(bb).f64Sub().f64Sub();
      f.localGet(a).localGet(bb).f64Sub().f64Add();
      f.localGet(lo).f64Add().localSet(lo);
      f.localGet(s).localSet(hi);
    }
    // n = nearest(hi); r = ((hi - n) + lo) π/2; q = n mod 4; negative x: -r, -q
    f.localGet(hi).f64Nearest().localSet(n);
    f.localGet(hi).localGet(n).f64Sub().localGet(lo).f64Add().f64Const(PIO2).f64Mul()
      .localSet(r);
    f.localGet(n).i64TruncSatF64S().i32WrapI64().localSet(q);
    f.localGet(x).f32Const(0).f32Lt();
    f.if();
    f.localGet(r).f64Neg().localSet(r);
    f.i32Const(0).localGet(q).i32Sub().localSet(q);
    f.end();
    f.localGet(q).i32Const(3).i32And().localSet(q);
  }
  f.end();
}

/** sin(r), cos(r) on |r| <= π/4 (+ a little): Taylor to r^15 and r^16 in f64. */
function sinCos64(f: Fn, r: number, sOut: number, cOut: number): void {
  const z = f.local("f64");
  f.localGet(r).localGet(r).f64Mul().localSet(z);
  let fact = 1;
  const sc: number[] = [];
  const cc: number[] = [];
  for (let k = 1; k <= 16; k++) {
    fact *= k;
    if (k % 2 === 1 && k > 1) sc.push((((k - 1) / 2) % 2 === 1 ? -1 : 1) / fact);
    if (k % 2 === 0) cc.push(((k / 2) % 2 === 1 ? -1 : 1) / fact);
  }
  // sin r = r + r z (s1 + z (s2 + ...)), s_k = (-1)^k / (2k+1)!
  f.f64Const(sc[sc.length - 1]!);
  for (let k = sc.length - 2; k >= 0; k--) f.localGet(z).f64Mul().f64Const(sc[k]!).f64Add();
  f.localGet(z).f64Mul().localGet(r).f64Mul().localGet(r).f64Add().localSet(sOut);
  // cos r = 1 + z (c1 + z (c2 + ...)), c_k = (-1)^k / (2k)!
  f.f64Const(cc[cc.length - 1]!);
  for (let k = cc.length - 2; k >= 0; k--) f.localGet(z).f64Mul().f64Const(cc[k]!).f64Add();
  f.localGet(z).f64Mul().f64Const(1).f64Add().localSet(cOut);
}

/**
 * Pushes sin, cos or tan of the f32 local x as f32: x = q π/2 + r (reducePio2), the Taylor
 * series of r in f64 by quadrant, rounded once to f32 (the evaluator's Math.sin/cos/tan in
 * double, rounded: within an ulp). NaN and ±inf give NaN.
 */
export function trigf(f: Fn, x: number, which: "sin" | "cos" | "tan"): void {
  const r = f.local("f64");
  const q = f.local("i32");
  const sn = f.local("f64");
  const cs = f.local("f64");
  const res = f.local("f64");
  reducePio2(f, x, r, q);
  sinCos64(f, r, sn, cs);
  const pick = (vals: readonly (() => void)[]) => {
    // res = vals[q] by a select chain
    vals[0]!();
    f.localSet(res);
    for (let k = 1; k < 4; k++) {
      vals[k]!();
      f.localGet(res).localGet(q).i32Const(k).i32Eq().select().localSet(res);
    }
  };
  const S = () => f.localGet(sn);
  const C = () => f.localGet(cs);
  const nS = () => f.localGet(sn).f64Neg();
  const nC = () => f.localGet(cs).f64Neg();
  if (which === "sin") pick([S, C, nS, nC]);
  else if (which === "cos") pick([C, nS, nC, S]);
  else {
    const t = () => f.localGet(sn).localGet(cs).f64Div();
    const cot = () => f.localGet(cs).f64Neg().localGet(sn).f64Div();
    pick([t, cot, t, cot]);
  }
  // finite x: the result; else NaN
  f.localGet(res).f32DemoteF64().f32Bits(0x7fc00000);
  f.localGet(x).f32Abs().f32Const(Infinity).f32Lt().select();
}

// ---- atan2 and fmod: f64 code (scalar) -----------------------------------------------------

/**
 * Pushes atan2(y, x) of the f32 locals as f32: t = min/max of |y|, |x| in [0, 1], reduced
 * by π/4 above tan(π/8) and halved once more (atan t = 2 atan(t / (1 + √(1 + t²)))), the
 * Taylor series to t^23 in f64, then the octant and quadrant restored, rounded once. The
 * specials of C's atan2 (signed zeros, infinities) come out of the same steps: 0/0 counts as
 * 0, ∞/∞ as 1.
 */
export function atan2f(f: Fn, y: number, x: number): void {
  const a = f.local("f64");
  const b = f.local("f64");
  const t = f.local("f64");
  const swap = f.local("i32");
  const big = f.local("i32");
  const at = f.local("f64");
  f.localGet(y).f64PromoteF32().f64Abs().localSet(a);
  f.localGet(x).f64PromoteF32().f64Abs().localSet(b);
  f.localGet(a).localGet(b).f64Gt().localSet(swap);
  // t = smaller / larger; 0/0 -> 0, inf/inf -> 1
  f.localGet(b).localGet(a).f64Div().localGet(a).localGet(b).f64Div().localGet(swap).select()
    .localSet(t);
  f.f64Const(0).localGet(t).localGet(a).f64Const(0).f64Eq().select().localSet(t);
  f.f64Const(1).localGet(t).localGet(a).f64Const(Infinity).f64Eq().localGet(b)
    .f64Const(Infinity).f64Eq().i32And().select().localSet(t);
  f.localGet(t).f64Const(Math.SQRT2 - 1).f64Gt().localSet(big);
  f.localGet(t).f64Const(1).f64Sub().localGet(t).f64Const(1).f64Add().f64Div().localGet(t)
    .localGet(big).select().localSet(t);
  // halve the angle: t / (1 + sqrt(1 + t^2))
  f.localGet(t).f64Const(1).localGet(t).localGet(t).f64Mul().f64Const(1).f64Add().f64Sqrt()
    .f64Add().f64Div().localSet(t);
  const z = f.local("f64");
  f.localGet(t).localGet(t).f64Mul().localSet(z);
  // atan t = t (1 - z/3 + z^2/5 - ...), to t^23
  f.f64Const(-1 / 23);
  for (let k = 10; k >= 0; k--) {
    f.localGet(z).f64Mul().f64Const((k % 2 === 1 ? -1 : 1) / (2 * k + 1)).f64Add();
  }
  f.localGet(t).f64Mul().f64Const(2).f64Mul();
  f.f64Const(Math.PI / 4).f64Const(0).localGet(big).select().f64Add().localSet(at);
  f.f64Const(Math.PI / 2).localGet(at).f64Sub().localGet(at).localGet(swap).select().localSet(at);
  // x's sign bit set (x < 0 or -0): pi - at; then y's sign
  f.f64Const(Math.PI).localGet(at).f64Sub().localGet(at);
  f.localGet(x).i32ReinterpretF32().i32Const(0).i32LtS().select();
  f.localGet(y).f64PromoteF32().f64Copysign().f32DemoteF64();
  // NaN in, NaN out
  const r = f.local("f32");
  f.localSet(r);
  f.localGet(r).f32Bits(0x7fc00000);
  f.localGet(x).localGet(x).f32Eq().localGet(y).localGet(y).f32Eq().i32And().select();
}

/**
 * Pushes fmod(a, b) of the f32 locals as f32, exactly (C's fmod; JavaScript's %): |b| scaled
 * by a power of two to just below |a|, then subtracted where it fits and halved, down to |b|
 * (each subtraction is exact: both values have 24-bit significands within a factor of two).
 * The result has a's sign; NaN for b = 0, an infinite a or a NaN; a itself when |a| < |b|.
 */
export function fmodf(f: Fn, a: number, b: number): void {
  const r = f.local("f64");
  const d = f.local("f64");
  const dd = f.local("f64");
  f.localGet(a).f64PromoteF32().f64Abs().localSet(r);
  f.localGet(b).f64PromoteF32().f64Abs().localSet(d);
  f.localGet(r).localGet(d).f64Ge().localGet(d).f64Const(Infinity).f64Lt().i32And()
    .localGet(r).f64Const(Infinity).f64Lt().i32And().localGet(d).f64Const(0).f64Gt().i32And();
  f.if();
  {
    // dd = d 2^(er - ed) (f64 exponents; every f32 is a normal f64)
    const ex = (l: number) =>
      f.localGet(l).i64ReinterpretF64().i64Const(52n).i64ShrU().i64Const(0x7ffn).i64And();
    f.localGet(d);
    ex(r);
    ex(d);
    f.i64Sub().i64Const(1023n).i64Add().i64Const(52n).i64Shl().f64ReinterpretI64().f64Mul()
      .localSet(dd);
    f.block().loop();
    f.localGet(dd).localGet(d).f64Lt().brIf(1);
    f.localGet(r).localGet(dd).f64Sub().localGet(r).localGet(r).localGet(dd).f64Ge().select()
      .localSet(r);
    f.localGet(dd).f64Const(0.5).f64Mul().localSet(dd);
    f.br(0).end().end();
  }
  f.end();
  // |a| < |b| (or b infinite) leaves r = |a|; NaN cases
  f.localGet(r).f32DemoteF64().localGet(a).f32Copysign();
  f.f32Bits(0x7fc00000);
  f.localGet(d).f64Const(0).f64Gt().localGet(a).f32Abs().f32Const(Infinity).f32Lt().i32And()
    .localGet(b).localGet(b).f32Eq().i32And();
  f.select();
}
