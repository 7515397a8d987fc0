// Matmul benchmark: f32 [n, n] x [n, n] as one `dot` module. Prints GFLOP/s (2 n^3 flops per
// run) of a naive i-j-k triple loop over Float32Arrays (double accumulator), of the
// interpreter backend (the reference evaluator; a smaller size, it is slow), and of the js
// backend (packed, register-blocked kernel) and of the wasm backend (generated SIMD128 GEMM:
// packed panels, a 4x8 micro-kernel in v128 accumulators; checked within the tolerance tier's
// sum bound) at 256, 512 and 1024. Target: js at 512 >= 3x the naive loop. Run with
// `npm run bench:kernels` (or `npx tsx bench/matmul.ts`).

import { ModuleBuilder } from "../ir/builder.ts";
import { literal, type Literal } from "../ir/literal.ts";
import { arrayShape } from "../ir/shape.ts";
import { getBackend, single } from "../runtime/backend.ts";
import { jsBackend } from "../runtime/js/backend.ts";
import { wasmBackend } from "../runtime/wasm/backend.ts";
import "../runtime/interpreter.ts";

function dotModule(n: number) {
  const mb = new ModuleBuilder(`matmul_${n}`);
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [n, n]));
    const y = b.parameter(arrayShape("f32", [n, n]));
    return b.dot(x, y, { lhsContracting: [1], rhsContracting: [0] });
  });
  return mb.build();
}

function naive(a: Float32Array, b: Float32Array, n: number): Float32Array {
  const out = new Float32Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let k = 0; k < n; k++) s += a[i * n + k]! * b[k * n + j]!;
      out[i * n + j] = s;
    }
  }
  return out;
}

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/** GFLOP/s of `f` (median run time over at least `minMs`, at least 3 runs). */
function gflops(n: number, f: () => unknown, minMs = 1500): number {
  f();
  const runs: number[] = [];
  const t0 = performance.now();
  while (performance.now() - t0 < minMs || runs.length < 3) {
    const s = performance.now();
    f();
    runs.push(performance.now() - s);
  }
  runs.sort((p, q) => p - q);
  return (2 * n ** 3) / (runs[runs.length >> 1]! * 1e6);
}

function report(label: string, n: number, g: number): void {
  console.log(`${label.padEnd(14)} n=${String(n).padEnd(5)} ${g.toFixed(3).padStart(8)} GFLOP/s`);
}

const results = new Map<string, number>();
for (const n of [128, 256, 512, 1024]) {
  const a = random(n * n, n);
  const b = random(n * n, n + 1);
  const inputs: Literal[] = [literal("f32", [n, n], a), literal("f32", [n, n], b)];
  const m = dotModule(n);
  if (n === 128) {
    const interp = getBackend("interpreter").compile(m);
    report("interpreter", n, gflops(n, () => interp.run(inputs), 500));
    continue;
  }
  const g = gflops(n, () => naive(a, b, n), n === 1024 ? 1 : 1500);
  report("naive loop", n, g);
  results.set(`naive${n}`, g);
  const exe = jsBackend.compile(m);
  const out = single(exe.run(inputs)).data as Float32Array;
  const ref = naive(a, b, n);
  for (let i = 0; i < n * n; i++) {
    if (!Object.is(out[i], ref[i])) {
      throw new Error(`js dot differs at ${i}: ${out[i]} vs ${ref[i]}`);
    }
  }
  const j = gflops(n, () => exe.run(inputs));
  report("js backend", n, j);
  results.set(`js${n}`, j);
  const wexe = wasmBackend.compile(m);
  const wout = single(wexe.run(inputs)).data as Float32Array;
  for (let i = 0; i < n * n; i++) {
    // f32 sums in k order: within n * eps * Σ|terms| (inputs are in [-1, 1]).
    if (!(Math.abs(wout[i]! - ref[i]!) <= 2 * n * 2 ** -23 * n)) {
      throw new Error(`wasm dot differs at ${i}: ${wout[i]} vs ${ref[i]}`);
    }
  }
  const w = gflops(n, () => wexe.run(inputs));
  report("wasm backend", n, w);
  results.set(`wasm${n}`, w);
}
for (const n of [256, 512, 1024]) {
  const r = results.get(`wasm${n}`)! / results.get(`js${n}`)!;
  console.log(`wasm / js at ${n}: ${r.toFixed(2)}x`);
}
const speedup = results.get("js512")! / results.get("naive512")!;
console.log(`js / naive at 512: ${speedup.toFixed(2)}x (target >= 3x)`);
