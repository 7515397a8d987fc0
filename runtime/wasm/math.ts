// Transcendental f32 functions for the wasm backend, as lane expressions (lanes.ts): the same
// algorithms, constants and operation order as the native backend's runtime/native/csrc/
// kiln_math.h (its portable, non-FMA build: wasm f32 arithmetic is IEEE single precision, one
// rounding per op), so their error is the one measured there over all 2^32 inputs and they
// run in the tolerance tier (runtime/tiers.ts TRANSCENDENTAL_ULPS). Branch-free: both sides of
// every select are computed, so each function works on four lanes as well as on one.

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
