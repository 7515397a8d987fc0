// The wasm backend's f32 GEMM: out[b, m, n] = Σ_k A[b, m, k] B[b, k, n] for any dot_general
// (the js backend's canonical-form plan, kernels_dot.ts, addresses any layout by offset
// tables). Per batch, JavaScript packs B into 8-column panels [N/8][K][8] and A into 4-row
// panels [M/4][K][4] in the memory's scratch region (zero-padded), then one generated wasm
// function runs the register-blocked micro-kernel: a 4 x 8 tile of f32 in eight v128
// accumulators, k in order from +0 (a four-lane splat of A, by v128.load32_splat, times two
// vectors of B per row and k), over column blocks of GEMM_NB so a block of packed B stays in
// cache while every A panel streams past it. Full tiles store straight to the output; edge
// tiles through a small tile buffer. Relaxed-SIMD FMA (`f32x4.relaxed_madd`) is used only
// where the engine validates it. Sums are in k order but in f32 (the tolerance tier's
// reduction bound), not the evaluator's double.

import type { DotPlan } from "../js/kernels_dot.ts";
import { Fn, type ModuleBuilder, relaxedSimdSupported } from "./encode.ts";
import { MAX_WASM_PARTS, PARTS_PER_THREAD } from "./threads.ts";

/** Columns per cache block of packed B. */
export const GEMM_NB = 128;
/** Rows of the micro-kernel's tile (6 measured slower: V8 spills its twelve accumulators). */
const MR = 4;
const NR = 8;

const TILE_BYTES = MR * NR * 4;

/** Scratch bytes a plan's packing needs (packed B, packed A, an edge tile per part). */
export function gemmScratchBytes(p: DotPlan): number {
  const nP = Math.ceil(p.N / NR) * NR;
  const mP = Math.ceil(p.M / MR) * MR;
  return 4 * (nP * p.K + mP * p.K) + TILE_BYTES * MAX_WASM_PARTS + 64;
}

/** Adds the exported function `gemm(ap, bp, c, M, N, K, ldc, tp)` to a module. */
export function addGemm(mb: ModuleBuilder, fma = relaxedSimdSupported()): void {
  const P = { ap: 0, bp: 1, c: 2, M: 3, N: 4, K: 5, ldc: 6, tp: 7 };
  const f = new Fn(Array.from({ length: 8 }, () => "i32" as const), []);
  const jb = f.local("i32");
  const jbEnd = f.local("i32");
  const ip = f.local("i32");
  const jp = f.local("i32");
  const k = f.local("i32");
  const pa = f.local("i32");
  const pb = f.local("i32");
  const mr = f.local("i32");
  const nc = f.local("i32");
  const crow = f.local("i32");
  const r = f.local("i32");
  const cc = f.local("i32");
  const acc = Array.from({ length: MR * 2 }, () => f.local("v128"));
  const b0 = f.local("v128");
  const b1 = f.local("v128");
  const a = f.local("v128");
  const ldcBytes = f.local("i32");

  const min = (x: () => void, y: () => void, tmpA: number) => {
    // tmpA = y < x ? y : x
    x();
    f.localSet(tmpA);
    y();
    f.localGet(tmpA);
    y();
    f.localGet(tmpA);
    f.i32LtS();
    f.select();
    f.localSet(tmpA);
  };
  const madd = (accL: number, bv: number) => {
    if (fma) {
      f.localGet(a).localGet(bv).localGet(accL).f32x4RelaxedMadd().localSet(accL);
    } else {
      f.localGet(accL).localGet(a).localGet(bv).f32x4Mul().f32x4Add().localSet(accL);
    }
  };

  f.localGet(P.ldc).i32Const(2).i32Shl().localSet(ldcBytes);
  f.i32Const(0).localSet(jb);
  f.block().loop(); // jb
  f.localGet(jb).localGet(P.N).i32GeS().brIf(1);
  min(() => f.localGet(jb).i32Const(GEMM_NB).i32Add(), () => f.localGet(P.N), jbEnd);
  f.i32Const(0).localSet(ip);
  f.block().loop(); // ip
  f.localGet(ip).localGet(P.M).i32GeS().brIf(1);
  min(() => f.i32Const(MR), () => f.localGet(P.M).localGet(ip).i32Sub(), mr);
  f.localGet(jb).localSet(jp);
  f.block().loop(); // jp
  f.localGet(jp).localGet(jbEnd).i32GeS().brIf(1);
  for (const l of acc) f.v128Const([0, 0, 0, 0]).localSet(l);
  // pa = ap + ip * K * 4 bytes (panel ip/4 of K*16 bytes); pb = bp + jp * K * 4.
  f.localGet(P.ap).localGet(ip).localGet(P.K).i32Mul().i32Const(2).i32Shl().i32Add()
    .localSet(pa);
  f.localGet(P.bp).localGet(jp).localGet(P.K).i32Mul().i32Const(2).i32Shl().i32Add()
    .localSet(pb);
  f.localGet(P.K).localSet(k);
  // One k step per iteration: two vectors of B, each row's A splat (v128.load32_splat),
  // eight multiply-adds. (Unrolling by 2 or 4 measured slower: V8 spills the accumulators.)
  f.block().loop(); // k
  f.localGet(k).i32Eqz().brIf(1);
  f.localGet(pb).v128Load().localSet(b0);
  f.localGet(pb).v128Load(16).localSet(b1);
  for (let row = 0; row < MR; row++) {
    f.localGet(pa).v128Load32Splat(row * 4).localSet(a);
    madd(acc[2 * row]!, b0);
    madd(acc[2 * row + 1]!, b1);
  }
  f.localGet(pa).i32Const(MR * 4).i32Add().localSet(pa);
  f.localGet(pb).i32Const(NR * 4).i32Add().localSet(pb);
  f.localGet(k).i32Const(1).i32Sub().localSet(k);
  f.br(0).end().end(); // k
  min(() => f.i32Const(NR), () => f.localGet(P.N).localGet(jp).i32Sub(), nc);
  // crow = c + (ip * ldc + jp) * 4
  f.localGet(P.c).localGet(ip).localGet(P.ldc).i32Mul().localGet(jp).i32Add().i32Const(2)
    .i32Shl().i32Add().localSet(crow);
  f.localGet(mr).i32Const(MR).i32Eq().localGet(nc).i32Const(NR).i32Eq().i32And();
  f.if();
  for (let row = 0; row < MR; row++) {
    f.localGet(crow).localGet(acc[2 * row]!).v128Store();
    f.localGet(crow).localGet(acc[2 * row + 1]!).v128Store(16);
    f.localGet(crow).localGet(ldcBytes).i32Add().localSet(crow);
  }
  f.else();
  for (let row = 0; row < MR; row++) {
    f.localGet(P.tp).localGet(acc[2 * row]!).v128Store(row * 32);
    f.localGet(P.tp).localGet(acc[2 * row + 1]!).v128Store(row * 32 + 16);
  }
  f.i32Const(0).localSet(r);
  f.block().loop(); // r
  f.localGet(r).localGet(mr).i32GeS().brIf(1);
  f.i32Const(0).localSet(cc);
  f.block().loop(); // cc
  f.localGet(cc).localGet(nc).i32GeS().brIf(1);
  f.localGet(crow).localGet(r).localGet(ldcBytes).i32Mul().i32Add().localGet(cc).i32Const(2)
    .i32Shl().i32Add();
  f.localGet(P.tp).localGet(r).i32Const(5).i32Shl().i32Add().localGet(cc).i32Const(2).i32Shl()
    .i32Add().f32Load();
  f.f32Store();
  f.localGet(cc).i32Const(1).i32Add().localSet(cc).br(0).end().end(); // cc
  f.localGet(r).i32Const(1).i32Add().localSet(r).br(0).end().end(); // r
  f.end(); // if
  f.localGet(jp).i32Const(NR).i32Add().localSet(jp);
  f.br(0).end().end(); // jp
  f.localGet(ip).i32Const(MR).i32Add().localSet(ip);
  f.br(0).end().end(); // ip
  f.localGet(jb).i32Const(GEMM_NB).i32Add().localSet(jb);
  f.br(0).end().end(); // jb
  mb.addFunction(f, "gemm");
  mb.addFunction(packBFn(), "gemm_pack_b");
  mb.addFunction(packBtFn(), "gemm_pack_bt");
  mb.addFunction(packBtFn(MR), "gemm_pack_a");
  mb.addFunction(packBFn(MR), "gemm_pack_at");
}

/**
 * `gemm_pack_bt(src, dst, K, panels, ldb)`: the full 8-column panels of a B stored
 * transposed (column n at src + n ldb floats, k contiguous: `x @ W^T` with W [N, K]) into
 * [panels][K][8]: eight row pointers, one f32 each per k. With width 4, `gemm_pack_a`: the
 * full 4-row panels of a row-major A (row m at src + m lda floats) into [panels][K][4].
 */
function packBtFn(NR = 8): Fn {
  const f = new Fn(Array.from({ length: 5 }, () => "i32" as const), []);
  const [src, dst, K, panels, ldb] = [0, 1, 2, 3, 4];
  const jp = f.local("i32");
  const k = f.local("i32");
  const d = f.local("i32");
  const rows = Array.from({ length: NR }, () => f.local("i32"));
  f.i32Const(0).localSet(jp);
  f.localGet(dst).localSet(d);
  f.block().loop(); // jp
  f.localGet(jp).localGet(panels).i32GeS().brIf(1);
  rows.forEach((r, c) => {
    // src + (jp * 8 + c) * ldb * 4
    f.localGet(src).localGet(jp).i32Const(NR).i32Mul().i32Const(c).i32Add().localGet(ldb)
      .i32Mul().i32Const(2).i32Shl().i32Add().localSet(r);
  });
  f.localGet(K).localSet(k);
  f.block().loop(); // k
  f.localGet(k).i32Eqz().brIf(1);
  rows.forEach((r, c) => {
    f.localGet(d).localGet(r).f32Load().f32Store(c * 4);
    f.localGet(r).i32Const(4).i32Add().localSet(r);
  });
  f.localGet(d).i32Const(NR * 4).i32Add().localSet(d);
  f.localGet(k).i32Const(1).i32Sub().localSet(k);
  f.br(0).end().end();
  f.localGet(jp).i32Const(1).i32Add().localSet(jp);
  f.br(0).end().end();
  return f;
}

/**
 * `gemm_pack_b(src, dst, K, panels, ldb)`: the full 8-column panels of a row-major B (row
 * stride ldb floats) into [panels][K][8], two v128 copies per row and panel. With width 4,
 * `gemm_pack_at`: the full 4-row panels of a transposed A (element (m, k) at src + k lda + m)
 * into [panels][K][4], one v128 copy each.
 */
function packBFn(NR = 8): Fn {
  const f = new Fn(Array.from({ length: 5 }, () => "i32" as const), []);
  const [src, dst, K, panels, ldb] = [0, 1, 2, 3, 4];
  const jp = f.local("i32");
  const k = f.local("i32");
  const s = f.local("i32");
  const d = f.local("i32");
  f.i32Const(0).localSet(jp);
  f.localGet(dst).localSet(d);
  f.block().loop(); // jp
  f.localGet(jp).localGet(panels).i32GeS().brIf(1);
  f.localGet(src).localGet(jp).i32Const(NR === 8 ? 5 : 4).i32Shl().i32Add().localSet(s);
  f.localGet(K).localSet(k);
  f.block().loop(); // k
  f.localGet(k).i32Eqz().brIf(1);
  f.localGet(d).localGet(s).v128Load().v128Store();
  if (NR === 8) f.localGet(d).localGet(s).v128Load(16).v128Store(16);
  f.localGet(d).i32Const(NR * 4).i32Add().localSet(d);
  f.localGet(s).localGet(ldb).i32Const(2).i32Shl().i32Add().localSet(s);
  f.localGet(k).i32Const(1).i32Sub().localSet(k);
  f.br(0).end().end();
  f.localGet(jp).i32Const(1).i32Add().localSet(jp);
  f.br(0).end().end();
  return f;
}

const layouts = new WeakMap<DotPlan, { kind: "rows" | "cols" | "other"; ld: number }>();
const aLayouts = new WeakMap<DotPlan, { kind: "rows" | "cols" | "other"; ld: number }>();

/**
 * How A is laid out per batch: row-major over (m, k) (`rows`: aM[m] = m lda, aK[k] = k, packed
 * by gemm_pack_a), transposed (`cols`: aM[m] = m, aK[k] = k lda, by gemm_pack_at), or neither
 * (packed from the offset tables by JavaScript).
 */
function aLayout(p: DotPlan): { kind: "rows" | "cols" | "other"; ld: number } {
  const { M, K, aM, aK } = p;
  if (aM[0] !== 0 || aK[0] !== 0) return { kind: "other", ld: 0 };
  const ldr = M > 1 ? aM[1]! : K;
  let rows = ldr >= K;
  for (let k = 0; rows && k < K; k++) rows = aK[k] === k;
  for (let m = 0; rows && m < M; m++) rows = aM[m] === m * ldr;
  if (rows) return { kind: "rows", ld: ldr };
  const ldc = K > 1 ? aK[1]! : M;
  let cols = ldc >= M;
  for (let m = 0; cols && m < M; m++) cols = aM[m] === m;
  for (let k = 0; cols && k < K; k++) cols = aK[k] === k * ldc;
  return cols ? { kind: "cols", ld: ldc } : { kind: "other", ld: 0 };
}

/**
 * How B is laid out per batch: row-major over (k, n) (`rows`: bK[k] = k ldb, bN[n] = n),
 * transposed (`cols`: bK[k] = k, bN[n] = n ldb), or neither (packed from the offset tables).
 */
function bLayout(p: DotPlan): { kind: "rows" | "cols" | "other"; ld: number } {
  const r = rowMajorStride(p);
  if (r >= 0) return { kind: "rows", ld: r };
  const { K, N, bK, bN } = p;
  const ld = N > 1 ? bN[1]! - bN[0]! : K;
  if (bN[0] !== 0 || ld < K) return { kind: "other", ld: 0 };
  for (let k = 0; k < K; k++) if (bK[k] !== k) return { kind: "other", ld: 0 };
  for (let n = 0; n < N; n++) if (bN[n] !== n * ld) return { kind: "other", ld: 0 };
  return { kind: "cols", ld };
}

/** The row stride when B is row-major over (k, n) (bK[k] = k ldb, bN[n] = n), else -1. */
function rowMajorStride(p: DotPlan): number {
  const { K, N, bK, bN } = p;
  const ldb = K > 1 ? bK[1]! - bK[0]! : N;
  if (bK[0] !== 0 || ldb < N) return -1;
  for (let n = 0; n < N; n++) if (bN[n] !== n) return -1;
  for (let k = 0; k < K; k++) if (bK[k] !== k * ldb) return -1;
  return ldb;
}

interface GemmMem {
  readonly memory: WebAssembly.Memory;
  readonly exports: Record<string, (...args: number[]) => void>;
}

/** A kernel call that runs on finished rows lo..hi (a per-tile epilogue): export and args. */
export interface GemmEpilogue {
  readonly fn: string;
  args(lo: number, hi: number): number[];
}

/**
 * How a GEMM splits across threads (backend.ts makes one per run): the thread count, the work
 * from which a split pays, and one parallel step on nt threads — `add(part, fn, args)` puts a
 * call in part `part`'s row (parts are taken by whichever thread is free, each runs its calls
 * in order); `extra` runs on this thread before it takes parts.
 */
export interface GemmThreads {
  readonly threads: number;
  readonly minWork: number;
  index(name: string): number;
  step(nt: number, build: (add: (t: number, fn: number, args: number[]) => void) => void,
    extra?: () => void): void;
}

/** Most ints of one row a GEMM step may need besides its epilogue's args. */
const ROW_BUDGET = 120;

/** Splits `n` items into `parts` contiguous shares: the start of share t. */
const share = (n: number, parts: number, t: number) => Math.floor((n * t) / parts);

/**
 * Runs an f32 dot over the memory: A, B and out are byte addresses of the operands (laid out
 * as the plan says) and of the [batch, M, N] output; rows m < mLim, columns n < nLim and
 * contracting positions k < kLim are computed (extent hints, as the js kernel). `epi` runs on
 * each batch's finished rows. With `par`, a batch big enough is split across threads: by row
 * panels (B packed first, in a step of its own, then each thread's rows and their epilogue),
 * or by column panels where there are too few rows. Each output element is computed by one
 * thread with the same operations in the same order, so the bits do not depend on the split.
 */
export function runGemm(
  mem: GemmMem,
  p: DotPlan,
  A: number,
  B: number,
  out: number,
  scratch: number,
  epi: GemmEpilogue | null,
  mLim = p.M,
  nLim = p.N,
  kLim = p.K,
  par?: GemmThreads,
): void {
  const { nb, M, N, K, aB, aM, aK, bB, bK, bN } = p;
  const Mc = mLim < M ? mLim : M;
  const Nc = nLim < N ? nLim : N;
  const Kc = kLim < K ? (kLim > 0 ? kLim : 0) : K;
  if (nb * Mc * Nc === 0) return;
  const f32 = new Float32Array(mem.memory.buffer);
  const nP = Math.ceil(Nc / NR);
  const mP = Math.ceil(Mc / MR);
  const bp = scratch;
  const ap = bp + nP * NR * Kc * 4;
  const tp = ap + mP * MR * Kc * 4;
  const a0 = A >> 2;
  const b0 = B >> 2;
  const bpi = bp >> 2;
  const api = ap >> 2;
  const gemm = mem.exports["gemm"]!;
  let lay = layouts.get(p);
  if (lay === undefined) layouts.set(p, (lay = bLayout(p)));
  const packName = lay.kind === "rows" ? "gemm_pack_b" : "gemm_pack_bt";
  const packB = mem.exports[packName]!;
  const full = lay.kind !== "other" ? Nc >> 3 : 0;
  const ld = lay.ld;
  let layA = aLayouts.get(p);
  if (layA === undefined) aLayouts.set(p, (layA = aLayout(p)));
  const packAName = layA.kind === "rows" ? "gemm_pack_a" : "gemm_pack_at";
  const packA = mem.exports[packAName]!;
  const fullA = layA.kind !== "other" ? Mc >> 2 : 0;
  const lda = layA.ld;
  /** The byte address of A's full panel q in batch base ab (a float index). */
  const aPanelSrc = (ab: number, q: number) =>
    (ab + (layA.kind === "rows" ? q * MR * lda : q * MR)) * 4;
  /** The byte address of B's full panel q in batch base bb (a float index). */
  const panelSrc = (bb: number, q: number) =>
    (bb + (lay.kind === "rows" ? q * NR : q * NR * ld)) * 4;
  const epiCall = epi ? (lo: number, hi: number) => mem.exports[epi.fn]!(...epi.args(lo, hi))
    : null;
  // Threads for a batch: enough work per thread, and a row that holds the calls.
  let nt = 1;
  if (par && par.threads > 1) {
    const byWork = Math.floor((Mc * Nc * Kc) / Math.max(1, par.minWork));
    const rowFits = epi === null || 4 + epi.args(0, 0).length <= ROW_BUDGET;
    nt = rowFits ? Math.min(par.threads, byWork, Math.max(mP, nP)) : 1;
  }
  const byRows = mP >= nt || mP >= nP;
  for (let b = 0; b < nb; b++) {
    const bb = b0 + bB[b]!;
    const ab = a0 + aB[b]!;
    const c0 = out + b * M * N * 4;
    // The parts packed here by JavaScript: B's panels past the full ones (zero past Nc), and
    // A's (rows past its full panels, zero past Mc).
    const packRest = () => {
      for (let k = 0; k < Kc; k++) {
        const bk = bb + bK[k]!;
        for (let n = full * NR; n < nP * NR; n++) {
          f32[bpi + (n >> 3) * Kc * NR + k * NR + (n & 7)] = n < Nc ? f32[bk + bN[n]!]! : 0;
        }
      }
      for (let m = fullA * MR; m < mP * MR; m++) {
        const o = api + (m >> 2) * Kc * MR + (m & 3);
        if (m < Mc) {
          const am = ab + aM[m]!;
          for (let k = 0; k < Kc; k++) f32[o + k * MR] = f32[am + aK[k]!]!;
        } else {
          for (let k = 0; k < Kc; k++) f32[o + k * MR] = 0;
        }
      }
    };
    if (nt < 2 || !par) {
      if (full > 0) packB(panelSrc(bb, 0), bp, Kc, full, ld);
      if (fullA > 0) packA(aPanelSrc(ab, 0), ap, Kc, fullA, lda);
      packRest();
      gemm(ap, bp, c0, Mc, Nc, Kc, N, tp);
      if (epiCall) epiCall(b * M, b * M + Mc);
      continue;
    }
    const fGemm = par.index("gemm");
    const fPack = par.index(packName);
    const fPackA = par.index(packAName);
    const fEpi = epi ? par.index(epi.fn) : -1;
    if (byRows) {
      // Step 1: B's full panels split across threads, the rest (and A) here meanwhile.
      const n1 = Math.min(nt, full);
      if (n1 >= 2) {
        const parts = Math.min(full, n1 * PARTS_PER_THREAD, MAX_WASM_PARTS);
        par.step(n1, (add) => {
          for (let t = 0; t < parts; t++) {
            const q0 = share(full, parts, t);
            const q1 = share(full, parts, t + 1);
            if (q1 > q0) add(t, fPack, [panelSrc(bb, q0), bp + q0 * Kc * NR * 4, Kc, q1 - q0, ld]);
          }
        }, packRest);
      } else {
        if (full > 0) packB(panelSrc(bb, 0), bp, Kc, full, ld);
        packRest();
      }
      // Step 2: parts of row panels: A's packed, the rows computed, then their epilogue.
      const n2 = Math.min(nt, mP);
      const parts = Math.min(mP, n2 * PARTS_PER_THREAD, MAX_WASM_PARTS);
      par.step(n2, (add) => {
        for (let t = 0; t < parts; t++) {
          const r0 = share(mP, parts, t) * MR;
          const r1 = Math.min(Mc, share(mP, parts, t + 1) * MR);
          if (r1 <= r0) continue;
          const qa0 = share(mP, parts, t);
          const qa1 = Math.min(share(mP, parts, t + 1), fullA);
          if (qa1 > qa0) {
            add(t, fPackA, [aPanelSrc(ab, qa0), ap + qa0 * Kc * MR * 4, Kc, qa1 - qa0, lda]);
          }
          add(t, fGemm, [ap + r0 * Kc * 4, bp, c0 + r0 * N * 4, r1 - r0, Nc, Kc, N,
            tp + t * TILE_BYTES]);
          if (epi) add(t, fEpi, epi.args(b * M + r0, b * M + r1));
        }
      });
    } else {
      // Too few rows: A's full panels split across threads (the partial panels here), then
      // each thread packs its full B panels and computes its columns; the epilogue after.
      const n1 = Math.min(nt, fullA);
      if (n1 >= 2) {
        const parts = Math.min(fullA, n1 * PARTS_PER_THREAD, MAX_WASM_PARTS);
        par.step(n1, (add) => {
          for (let t = 0; t < parts; t++) {
            const q0 = share(fullA, parts, t);
            const q1 = share(fullA, parts, t + 1);
            if (q1 > q0) add(t, fPackA, [aPanelSrc(ab, q0), ap + q0 * Kc * MR * 4, Kc, q1 - q0, lda]);
          }
        }, packRest);
      } else {
        if (fullA > 0) packA(aPanelSrc(ab, 0), ap, Kc, fullA, lda);
        packRest();
      }
      const n2 = Math.min(nt, nP);
      const parts = Math.min(nP, n2 * PARTS_PER_THREAD, MAX_WASM_PARTS);
      par.step(n2, (add) => {
        for (let t = 0; t < parts; t++) {
          const q0 = share(nP, parts, t);
          const q1 = share(nP, parts, t + 1);
          if (q1 <= q0) continue;
          const fq = Math.min(q1, full);
          if (fq > q0) add(t, fPack, [panelSrc(bb, q0), bp + q0 * Kc * NR * 4, Kc, fq - q0, ld]);
          const cEnd = Math.min(Nc, q1 * NR);
          add(t, fGemm, [ap, bp + q0 * Kc * NR * 4, c0 + q0 * NR * 4, Mc, cEnd - q0 * NR, Kc, N,
            tp + t * TILE_BYTES]);
        }
      });
      if (epiCall) epiCall(b * M, b * M + Mc);
    }
  }
}
