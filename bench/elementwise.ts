// Elementwise benchmark: a 5-op "gelu-ish" chain (x*a+b, tanh, *, +, max) over 4M f32 values as
// ONE kLoop fusion run by the js backend, against one hand-written JavaScript loop doing the
// same math with the same f32 semantics (Math.fround after every op, NaN-propagating max).
// Prints milliseconds per run for both and their ratio (target: js within 1.5x of the loop).
// A second row runs the exact-GELU chain gelu(x*a+b) * sigmoid(x) (erf and logistic) the same
// way against a loop calling the evaluator's own erf, and prints ns per element. Both chains
// also run on the wasm backend (SIMD128 loop, polynomial tanh/erf/logistic), checked within
// the tolerance tier's program bound.
// Run with `npm run bench:kernels` (or `npx tsx bench/elementwise.ts`).

import { ModuleBuilder } from "../ir/builder.ts";
import { erf } from "../ir/evaluate_elementwise.ts";
import { literal, type Literal } from "../ir/literal.ts";
import { arrayShape } from "../ir/shape.ts";
import { single } from "../runtime/backend.ts";
import { jsBackend } from "../runtime/js/backend.ts";
import { toleranceProblem } from "../runtime/tiers.ts";
import { wasmBackend } from "../runtime/wasm/backend.ts";

const N = 4 * 1024 * 1024;
const A = 0.7978846;
const B = 0.044715;

function buildModule() {
  const mb = new ModuleBuilder("gelu_ish");
  const s = arrayShape("f32", [N]);
  const fused = mb.computation("fused_gelu_ish", (b) => {
    const x = b.parameter(s);
    const bc = (v: number) => b.broadcast(b.scalar("f32", v), [N], []);
    const t = b.tanh(b.add(b.multiply(x, bc(A)), bc(B)));
    return b.maximum(b.add(b.multiply(x, t), x), bc(0));
  });
  mb.entry("main", (b) => b.fusion([b.parameter(s)], fused, "kLoop"));
  return mb.build();
}

/** The same math, written by hand. */
function handWritten(x: Float32Array): Float32Array {
  const y = new Float32Array(x.length);
  const a = Math.fround(A);
  const bb = Math.fround(B);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    const t = Math.fround(Math.tanh(Math.fround(Math.fround(v * a) + bb)));
    const u = Math.fround(Math.fround(v * t) + v);
    y[i] = u !== u ? u : u < 0 ? 0 : u;
  }
  return y;
}

function time(label: string, f: () => unknown): number {
  for (let i = 0; i < 3; i++) f();
  const runs: number[] = [];
  const t0 = performance.now();
  while (performance.now() - t0 < 2000 || runs.length < 5) {
    const s = performance.now();
    f();
    runs.push(performance.now() - s);
  }
  runs.sort((p, q) => p - q);
  const med = runs[runs.length >> 1]!;
  console.log(`${label.padEnd(28)} ${med.toFixed(2).padStart(8)} ms  (median of ${runs.length})`);
  return med;
}

const values = new Float32Array(N);
for (let i = 0; i < N; i++) values[i] = Math.sin(i) * 4;
const input: Literal = literal("f32", [N], values);
const exe = jsBackend.compile(buildModule());
const check = single(exe.run([input])).data as Float32Array;
const ref = handWritten(values);
for (let i = 0; i < N; i++) {
  if (!Object.is(check[i], ref[i])) throw new Error(`mismatch at ${i}: ${check[i]} vs ${ref[i]}`);
}
console.log(`elementwise chain over ${N} f32 (one kLoop fusion)`);
const hand = time("hand-written loop", () => handWritten(values));
const js = time("js backend", () => exe.run([input]));
console.log(`ratio js / hand-written: ${(js / hand).toFixed(2)}x (target <= 1.5x)`);
const wexe = wasmBackend.compile(buildModule());
const wasmProblem = (m: ReturnType<typeof buildModule>, e: typeof wexe, want: unknown) =>
  toleranceProblem(m, [input], e.run([input]), want as Literal);
const why = wasmProblem(buildModule(), wexe, exe.run([input]));
if (why !== null) throw new Error(`wasm gelu-ish chain: ${why}`);
const wasm = time("wasm backend", () => wexe.run([input]));
console.log(`ratio wasm / js: ${(wasm / js).toFixed(2)}x`);

// ---- exact GELU times sigmoid: 0.5 u (1 + erf(u / sqrt 2)) * logistic(x), u = x*a + b --------

function buildGeluSigmoid() {
  const mb = new ModuleBuilder("gelu_sigmoid");
  const s = arrayShape("f32", [N]);
  const fused = mb.computation("fused_gelu_sigmoid", (b) => {
    const x = b.parameter(s);
    const bc = (v: number) => b.broadcast(b.scalar("f32", v), [N], []);
    const u = b.add(b.multiply(x, bc(A)), bc(B));
    const e = b.erf(b.multiply(u, bc(Math.SQRT1_2)));
    const g = b.multiply(b.multiply(u, bc(0.5)), b.add(e, bc(1)));
    return b.multiply(g, b.logistic(x));
  });
  mb.entry("main", (b) => b.fusion([b.parameter(s)], fused, "kLoop"));
  return mb.build();
}

function geluSigmoidByHand(x: Float32Array): Float32Array {
  const y = new Float32Array(x.length);
  const a = Math.fround(A);
  const bb = Math.fround(B);
  const r2 = Math.fround(Math.SQRT1_2);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    const u = Math.fround(Math.fround(v * a) + bb);
    const e = Math.fround(erf(Math.fround(u * r2)));
    const g = Math.fround(Math.fround(u * 0.5) * Math.fround(e + 1));
    y[i] = Math.fround(g * Math.fround(1 / (1 + Math.exp(-v))));
  }
  return y;
}

const exe2 = jsBackend.compile(buildGeluSigmoid());
const check2 = single(exe2.run([input])).data as Float32Array;
const ref2 = geluSigmoidByHand(values);
for (let i = 0; i < N; i++) {
  if (!Object.is(check2[i], ref2[i])) throw new Error(`gelu*sigmoid mismatch at ${i}`);
}
console.log(`exact gelu(x*a+b) * sigmoid(x) over ${N} f32 (one kLoop fusion)`);
const hand2 = time("hand-written loop", () => geluSigmoidByHand(values));
const js2 = time("js backend", () => exe2.run([input]));
const wexe2 = wasmBackend.compile(buildGeluSigmoid());
const why2 = wasmProblem(buildGeluSigmoid(), wexe2, exe2.run([input]));
if (why2 !== null) throw new Error(`wasm gelu*sigmoid: ${why2}`);
const wasm2 = time("wasm backend", () => wexe2.run([input]));
const ns = (ms: number) => ((ms * 1e6) / N).toFixed(1);
const ratio2 = (js2 / hand2).toFixed(2);
console.log(`ns/element: hand-written ${ns(hand2)}, js ${ns(js2)}, wasm ${ns(wasm2)}; ` +
  `ratio js / hand ${ratio2}x`);
