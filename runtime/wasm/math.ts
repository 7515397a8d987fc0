// Transcendental f32 functions for the wasm backend, as lane expressions (lanes.ts): the same
// algorithms, constants and operation order as the native backend's runtime/native/csrc/
// kiln_math.h (its portable, non-FMA build: wasm f32 arithmetic is IEEE single precision, one
// rounding per op), so their error is the one measured there over all 2^32 inputs and they
// run in the tolerance tier (runtime/tiers.ts TRANSCENDENTAL_ULPS). Branch-free: both sides of
// every select are computed, so each function works on four lanes as well as on one.

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
