// Side-by-side benchmarks: Kiln (eager, lazy, compiled per backend) against the runtimes a
// TypeScript user would pick instead — TensorFlow.js (cpu and wasm backends), onnxruntime-node
// (one thread and all threads), jax-js (jit on its wasm backend) — and a hand-written plain-JS
// loop, on the same float32 inputs. Every runtime's result is cross-checked against the
// reference (the plain-JS loop in f64; Kiln's reference evaluator for the transformer block)
// before anything is timed; a runtime that disagrees is reported with its difference and not
// timed. Prints one table per workload and writes bench/results/latest.json and latest.md with
// the machine and versions.
// Peers come from bench/peers/node_modules (`npm --prefix bench/peers ci`); a missing peer is a
// row that says so, never a download. Nothing here is used by tests except harness.ts.
//
//   npm run bench                  (installs the peers if needed, then this with --quick off)
//   npx tsx bench/peers/run.ts [--quick] [--out DIR]
//       [--only matmul,elementwise,mlp,block,gpt2,bert,resnet,generate,compile]
//
// The whole-model workloads (gpt2, bert, resnet, generate) and the compile-time tables
// (compile) have Kiln rows only — eager, lazy, compiled on js — cross-checked against Kiln
// eager. --quick runs them on small configs (same input shapes; see ZOO below), the full run on
// the zoo's "full" configs (GPT-2 small, BERT-base, ResNet-18).

import { execSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  add,
  clearLazyGraphs,
  compile,
  gelu,
  lazy,
  matmul,
  mul,
  relu,
  sigmoid,
  type Tensor,
  tensor,
} from "../../index.ts";
import type { Module } from "../../ir/module.ts";
import { moduleToProto } from "../../ir/proto.ts";
import { bert, gpt2, resnet } from "../../models/index.ts";
import { fullConfig as gpt2Full, GPT2Block } from "../../models/gpt2.ts";
import type { CacheResult } from "../../runtime/cache.ts";
import { compileModule } from "../../runtime/compile.ts";
import { backendNames, ProgramCache } from "../../runtime/index.ts";
import {
  crossCheck,
  markdownTable,
  measure,
  rate,
  ratio,
  type Row,
  summarize,
  textTable,
  type TimingOptions,
  type Tolerance,
  uniform,
  type WorkloadResult,
} from "./harness.ts";
import { float32, int64, type OnnxGraph, type OnnxNode, onnxModel } from "./onnx.ts";

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick");
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const ONLY = flag("only")?.split(",");
const OUT = resolve(flag("out") ?? join(here, "..", "results"));
const TIMING: TimingOptions = QUICK
  ? { warmup: 1, budgetMs: 400, minRuns: 3, maxRuns: 30 }
  : { warmup: 3, budgetMs: 2500, minRuns: 7, maxRuns: 200 };
const BASELINE = "Kiln compiled (js)";

// ---- the peers, loaded from bench/peers/node_modules; each typed by the little we use -------

interface TfTensor {
  dataSync(): Float32Array;
  dispose(): void;
}
interface Tf {
  version_core: string;
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
  getBackend(): string;
  tensor(values: Float32Array, shape: number[]): TfTensor;
  scalar(v: number): TfTensor;
  tidy<T extends TfTensor>(fn: () => T): T;
  matMul(a: TfTensor, b: TfTensor): TfTensor;
  add(a: TfTensor, b: TfTensor): TfTensor;
  mul(a: TfTensor, b: TfTensor): TfTensor;
  erf(a: TfTensor): TfTensor;
  sigmoid(a: TfTensor): TfTensor;
  relu(a: TfTensor): TfTensor;
  sub(a: TfTensor, b: TfTensor): TfTensor;
  div(a: TfTensor, b: TfTensor): TfTensor;
  sqrt(a: TfTensor): TfTensor;
  tanh(a: TfTensor): TfTensor;
  mean(a: TfTensor, axis: number, keepDims: boolean): TfTensor;
  softmax(a: TfTensor): TfTensor;
  reshape(a: TfTensor, shape: number[]): TfTensor;
  transpose(a: TfTensor, perm: number[]): TfTensor;
  split(a: TfTensor, parts: number, axis: number): TfTensor[];
}
interface OrtTensor {
  data: unknown;
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
interface Ort {
  Tensor: new (type: "float32", data: Float32Array, dims: number[]) => OrtTensor;
  InferenceSession: {
    create(model: Uint8Array, options: Record<string, unknown>): Promise<OrtSession>;
  };
}
interface JaxArray {
  readonly ref: JaxArray;
  dataSync(): ArrayLike<number>;
  dispose(): void;
}
type JaxFn = (...xs: JaxArray[]) => JaxArray;
interface JaxNp {
  array(v: Float32Array, o: { shape: number[] }): JaxArray;
  matmul(a: JaxArray, b: JaxArray): JaxArray;
  add(a: JaxArray, b: JaxArray | number): JaxArray;
  multiply(a: JaxArray, b: JaxArray | number): JaxArray;
  maximum(a: JaxArray, b: JaxArray | number): JaxArray;
  subtract(a: JaxArray, b: JaxArray | number): JaxArray;
  trueDivide(a: JaxArray, b: JaxArray | number): JaxArray;
  sqrt(a: JaxArray): JaxArray;
  tanh(a: JaxArray): JaxArray;
  mean(a: JaxArray, axis: number, o: { keepdims: boolean }): JaxArray;
  reshape(a: JaxArray, shape: number[]): JaxArray;
  transpose(a: JaxArray, perm: number[]): JaxArray;
  split(a: JaxArray, parts: number, axis: number): JaxArray[];
}
interface Jax {
  init(...devices: string[]): Promise<string[]>;
  defaultDevice(d?: string): string;
  jit(fn: JaxFn): JaxFn & { dispose(): void };
  numpy: JaxNp;
  nn: {
    sigmoid(a: JaxArray): JaxArray;
    gelu(a: JaxArray, o: { approximate: boolean }): JaxArray;
    softmax(a: JaxArray, axis: number): JaxArray;
  };
}

interface Peers {
  tf?: Tf;
  tfBackends: string[];
  ort?: Ort;
  jax?: Jax;
  versions: Record<string, string>;
  missing: Record<string, string>;
}

const peerRequire = createRequire(join(here, "package.json"));

/**
 * The installed version, from the package.json above the entry point (some packages' `exports`
 * hide `pkg/package.json` from require.resolve).
 */
function peerVersion(pkg: string): string {
  let dir = dirname(peerRequire.resolve(pkg));
  for (;;) {
    try {
      const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (meta.name === pkg && meta.version !== undefined) return meta.version;
    } catch {
      // no package.json here; keep walking up
    }
    const up = dirname(dir);
    if (up === dir) return "unknown";
    dir = up;
  }
}

async function importPeer(pkg: string): Promise<unknown> {
  // Resolved from bench/peers, so the root install never needs the peers.
  return import(peerRequire.resolve(pkg));
}

function message(e: unknown): string {
  return e instanceof Error ? e.message.split("\n")[0]! : String(e);
}

async function loadPeers(): Promise<Peers> {
  const peers: Peers = { tfBackends: [], versions: {}, missing: {} };
  const hint = "not installed (npm --prefix bench/peers ci)";
  try {
    const tf = (await importPeer("@tensorflow/tfjs-core")) as Tf;
    await importPeer("@tensorflow/tfjs-backend-cpu");
    peers.tf = tf;
    peers.tfBackends.push("cpu");
    peers.versions["@tensorflow/tfjs-core"] = peerVersion("@tensorflow/tfjs-core");
    peers.versions["@tensorflow/tfjs-backend-cpu"] = peerVersion("@tensorflow/tfjs-backend-cpu");
    try {
      const wasm = (await importPeer("@tensorflow/tfjs-backend-wasm")) as {
        setWasmPaths(prefix: string): void;
      };
      // The .wasm files ship in the package; load them from node_modules, never a CDN.
      const dist = join(dirname(peerRequire.resolve("@tensorflow/tfjs-backend-wasm")), "/");
      wasm.setWasmPaths(dist);
      peers.tfBackends.push("wasm");
      peers.versions["@tensorflow/tfjs-backend-wasm"] = peerVersion(
        "@tensorflow/tfjs-backend-wasm",
      );
    } catch (e) {
      peers.missing["tfjs wasm"] = message(e);
    }
  } catch {
    peers.missing["tfjs"] = hint;
  }
  try {
    peers.ort = (await importPeer("onnxruntime-node")) as Ort;
    peers.versions["onnxruntime-node"] = peerVersion("onnxruntime-node");
  } catch (e) {
    peers.missing["onnxruntime-node"] = /Cannot find/.test(message(e)) ? hint : message(e);
  }
  try {
    const jax = (await importPeer("@jax-js/jax")) as Jax;
    // Only the wasm device: jax-js's "cpu" device is its reference interpreter (minutes for
    // a 512 matmul), and asking init() for every device probes WebGPU, absent in Node.
    const got = await jax.init("wasm");
    if (!got.includes("wasm")) throw new Error("jax-js: the wasm device did not initialize");
    jax.defaultDevice("wasm");
    peers.jax = jax;
    peers.versions["@jax-js/jax"] = peerVersion("@jax-js/jax");
  } catch (e) {
    peers.missing["jax-js"] = /Cannot find/.test(message(e)) ? hint : message(e);
  }
  return peers;
}

// ---- workloads ------------------------------------------------------------------------------

/** One input array and its shape. */
interface Input {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** A runtime's implementation of a workload: prepare once, then `run` returns the output. */
type Prepared = () => ArrayLike<number> | Promise<ArrayLike<number>>;
interface Candidate {
  runtime: string;
  prepare: () => Promise<Prepared>;
}

class Skip extends Error {}

interface Workload {
  name: string;
  unit?: "GFLOP/s" | "GB/s";
  work?: number;
  inputs: Input[];
  tol: Tolerance;
  /** The reference output (computed once, untimed unless it is also a candidate). */
  reference: () => Float32Array;
  candidates: Candidate[];
  /** Timing for this workload instead of the global one (whole models: few, long runs). */
  timing?: TimingOptions;
  /** Text for every timed row's note, from its timing (e.g. per-token latency). */
  noteFor?: (medianMs: number) => string;
}

/** Kiln's three ways to run the same tensor function `f`, on Tensors made from the inputs. */
function kilnCandidates(
  inputs: Input[],
  f: (...xs: Tensor[]) => Tensor,
  opts: { interpreter: boolean },
): Candidate[] {
  const ts = () => inputs.map((x) => tensor(x.data, { shape: x.shape }));
  const out: Candidate[] = [
    {
      runtime: "Kiln eager",
      prepare: async () => {
        const xs = ts();
        return () => f(...xs).data() as Float32Array;
      },
    },
    {
      runtime: "Kiln lazy",
      prepare: async () => {
        const xs = ts();
        return () => lazy(() => f(...xs)).data() as Float32Array;
      },
    },
  ];
  for (const backend of backendNames()) {
    if (backend === "interpreter" && !opts.interpreter) continue;
    out.push({
      runtime: `Kiln compiled (${backend})`,
      prepare: async () => {
        const xs = ts();
        const cf = compile(f, { backend, cache: "memory", fullgraph: true });
        return () => cf(...xs).data() as Float32Array;
      },
    });
  }
  return out;
}

function tfCandidates(
  peers: Peers,
  inputs: Input[],
  f: (tf: Tf, ...xs: TfTensor[]) => TfTensor,
): Candidate[] {
  return ["cpu", "wasm"].map((backend) => ({
    runtime: `tfjs ${backend}`,
    prepare: async () => {
      const tf = peers.tf;
      if (!tf) throw new Skip(peers.missing["tfjs"] ?? "not loaded");
      if (!peers.tfBackends.includes(backend)) throw new Skip(peers.missing[`tfjs ${backend}`]);
      if (!(await tf.setBackend(backend))) throw new Skip(`backend ${backend} failed to start`);
      await tf.ready();
      const xs = inputs.map((x) => tf.tensor(x.data, x.shape));
      return () => {
        // tfjs's backend is a global; rows run one after another, so a change means a bug here.
        if (tf.getBackend() !== backend) throw new Error(`tfjs backend is ${tf.getBackend()}`);
        const y = tf.tidy(() => f(tf, ...xs));
        const data = y.dataSync();
        y.dispose();
        return data;
      };
    },
  }));
}

function ortCandidates(peers: Peers, inputs: Input[], graph: OnnxGraph): Candidate[] {
  const threads = cpus().length;
  const variants = threads > 1 ? [1, threads] : [1];
  return variants.map((n) => ({
    runtime: `onnxruntime-node (${n} thread${n > 1 ? "s" : ""})`,
    prepare: async () => {
      const ort = peers.ort;
      if (!ort) throw new Skip(peers.missing["onnxruntime-node"] ?? "not loaded");
      const session = await ort.InferenceSession.create(onnxModel(graph), {
        executionProviders: ["cpu"],
        graphOptimizationLevel: "all",
        intraOpNumThreads: n,
        interOpNumThreads: 1,
      });
      const feeds: Record<string, OrtTensor> = {};
      for (const x of inputs) feeds[x.name] = new ort.Tensor("float32", x.data, x.shape);
      const outName = graph.outputs[0]!.name;
      return async () => (await session.run(feeds))[outName]!.data as Float32Array;
    },
  }));
}

function jaxCandidate(
  peers: Peers,
  inputs: Input[],
  f: (np: JaxNp, jax: Jax, ...xs: JaxArray[]) => JaxArray,
): Candidate {
  return {
    runtime: "jax-js jit (wasm)",
    prepare: async () => {
      const jax = peers.jax;
      if (!jax) throw new Skip(peers.missing["jax-js"] ?? "not loaded");
      const np = jax.numpy;
      const xs = inputs.map((x) => np.array(x.data, { shape: x.shape }));
      const jf = jax.jit((...a: JaxArray[]) => f(np, jax, ...a));
      // jax-js moves arrays into calls; `.ref` keeps the inputs alive across runs.
      return () => jf(...xs.map((x) => x.ref)).dataSync();
    },
  };
}

function plainCandidate(fn: () => Float32Array): Candidate {
  return { runtime: "plain JS", prepare: async () => fn };
}

// -- matmul ------------------------------------------------------------------------------------

function matmulPlain(a: Float32Array, b: Float32Array, n: number, f64: boolean): Float32Array {
  // i-k-j order: the inner loop streams rows of b and of the output (what a careful hand-writer
  // does). The f64 variant is the reference: one rounding at the end.
  const out = new Float32Array(n * n);
  const acc = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    if (f64) acc.fill(0);
    const row = i * n;
    for (let k = 0; k < n; k++) {
      const aik = a[row + k]!;
      const bk = k * n;
      if (f64) for (let j = 0; j < n; j++) acc[j]! += aik * b[bk + j]!;
      else {
        for (let j = 0; j < n; j++) {
          out[row + j] = Math.fround(out[row + j]! + Math.fround(aik * b[bk + j]!));
        }
      }
    }
    if (f64) for (let j = 0; j < n; j++) out[row + j] = acc[j]!;
  }
  return out;
}

function matmulWorkload(peers: Peers, n: number): Workload {
  const inputs: Input[] = [
    { name: "a", shape: [n, n], data: uniform(n * n, n) },
    { name: "b", shape: [n, n], data: uniform(n * n, n + 1) },
  ];
  const [a, b] = [inputs[0]!.data, inputs[1]!.data];
  return {
    name: `matmul ${n}x${n}x${n}`,
    unit: "GFLOP/s",
    work: 2 * n ** 3,
    inputs,
    tol: { rtol: 1e-5, atol: 1e-5 },
    reference: () => matmulPlain(a, b, n, true),
    candidates: [
      ...kilnCandidates(inputs, (x, y) => matmul(x, y), { interpreter: n <= 256 }),
      plainCandidate(() => matmulPlain(a, b, n, false)),
      ...tfCandidates(peers, inputs, (tf, x, y) => tf.matMul(x, y)),
      ...ortCandidates(peers, inputs, {
        name: "matmul",
        inputs: [
          { name: "a", shape: [n, n] },
          { name: "b", shape: [n, n] },
        ],
        outputs: [{ name: "y", shape: [n, n] }],
        nodes: [{ op: "MatMul", inputs: ["a", "b"], outputs: ["y"] }],
      }),
      jaxCandidate(peers, inputs, (np, _jax, x, y) => np.matmul(x, y)),
    ],
  };
}

// -- elementwise chain: gelu(x*a+b) * sigmoid(x), exact (erf) GELU everywhere --------------------

const EW_A = 1.25;
const EW_B = -0.5;

/**
 * erf(x) from Numerical Recipes' Chebyshev fit of erfc (fractional error below 1.2e-7 everywhere),
 * in f64: JavaScript has no Math.erf, and the cross-check bound covers the fit's error.
 */
function erf(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 +
                            t *
                              (-1.13520398 +
                                t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? 1 - r : r - 1;
}

function chainPlain(x: Float32Array): Float32Array {
  const y = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    const u = v * EW_A + EW_B;
    const g = 0.5 * u * (1 + erf(u * Math.SQRT1_2));
    y[i] = g / (1 + Math.exp(-v));
  }
  return y;
}

function elementwiseWorkload(peers: Peers, n: number): Workload {
  const x = uniform(n, 7).map((v) => v * 4);
  const inputs: Input[] = [{ name: "x", shape: [n], data: x }];
  const c = (name: string, v: number) => ({ name, shape: [], values: new Float32Array([v]) });
  return {
    name: `elementwise gelu(x*a+b)*sigmoid(x), ${(n / 2 ** 20).toFixed(0)}M floats`,
    unit: "GB/s",
    work: 8 * n, // 4 bytes read + 4 bytes written per element
    inputs,
    tol: { rtol: 1e-5, atol: 1e-6 },
    reference: () => chainPlain(x),
    candidates: [
      ...kilnCandidates(inputs, (t) => mul(gelu(add(mul(t, EW_A), EW_B)), sigmoid(t)), {
        interpreter: false,
      }),
      plainCandidate(() => chainPlain(x)),
      ...tfCandidates(peers, inputs, (tf, t) => {
        const u = tf.add(tf.mul(t, tf.scalar(EW_A)), tf.scalar(EW_B));
        const e = tf.erf(tf.mul(u, tf.scalar(Math.SQRT1_2)));
        const g = tf.mul(tf.mul(u, tf.scalar(0.5)), tf.add(e, tf.scalar(1)));
        return tf.mul(g, tf.sigmoid(t));
      }),
      ...ortCandidates(peers, inputs, {
        name: "chain",
        inputs: [{ name: "x", shape: [n] }],
        outputs: [{ name: "y", shape: [n] }],
        constants: [c("a", EW_A), c("b", EW_B), c("r", Math.SQRT1_2), c("h", 0.5), c("one", 1)],
        nodes: [
          { op: "Mul", inputs: ["x", "a"], outputs: ["xa"] },
          { op: "Add", inputs: ["xa", "b"], outputs: ["u"] },
          { op: "Mul", inputs: ["u", "r"], outputs: ["ur"] },
          { op: "Erf", inputs: ["ur"], outputs: ["e"] },
          { op: "Add", inputs: ["e", "one"], outputs: ["e1"] },
          { op: "Mul", inputs: ["u", "h"], outputs: ["uh"] },
          { op: "Mul", inputs: ["uh", "e1"], outputs: ["g"] },
          { op: "Sigmoid", inputs: ["x"], outputs: ["s"] },
          { op: "Mul", inputs: ["g", "s"], outputs: ["y"] },
        ],
      }),
      jaxCandidate(peers, inputs, (np, jax, t) =>
        np.multiply(
          jax.nn.gelu(np.add(np.multiply(t.ref, EW_A), EW_B), { approximate: false }),
          jax.nn.sigmoid(t),
        ),
      ),
    ],
  };
}

// -- MLP 784-1024-1024-10, ReLU, weights stored [in, out] ----------------------------------------

function linearPlain(
  x: Float32Array,
  w: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
  act: boolean,
  f64: boolean,
): Float32Array {
  const out = new Float32Array(m * n);
  const acc = new Float64Array(n);
  for (let i = 0; i < m; i++) {
    acc.fill(0);
    for (let p = 0; p < k; p++) {
      const xv = x[i * k + p]!;
      const wr = p * n;
      if (f64) for (let j = 0; j < n; j++) acc[j]! += xv * w[wr + j]!;
      else for (let j = 0; j < n; j++) acc[j] = Math.fround(acc[j]! + Math.fround(xv * w[wr + j]!));
    }
    for (let j = 0; j < n; j++) {
      const v = Math.fround(acc[j]! + b[j]!);
      out[i * n + j] = act && v < 0 ? 0 : v;
    }
  }
  return out;
}

function mlpWorkload(peers: Peers, batch: number, dims: number[]): Workload {
  const x = uniform(batch * dims[0]!, 1);
  const inputs: Input[] = [{ name: "x", shape: [batch, dims[0]!], data: x }];
  for (let l = 0; l + 1 < dims.length; l++) {
    const [k, n] = [dims[l]!, dims[l + 1]!];
    const scale = 1 / Math.sqrt(k);
    const w = uniform(k * n, 10 + l).map((v) => v * scale);
    inputs.push({ name: `w${l}`, shape: [k, n], data: w });
    inputs.push({ name: `b${l}`, shape: [n], data: uniform(n, 20 + l).map((v) => v * 0.1) });
  }
  const layers = dims.length - 1;
  const plain = (f64: boolean) => () => {
    let h = inputs[0]!.data;
    for (let l = 0; l < layers; l++) {
      const [w, b] = [inputs[1 + 2 * l]!.data, inputs[2 + 2 * l]!.data];
      h = linearPlain(h, w, b, batch, dims[l]!, dims[l + 1]!, l + 1 < layers, f64);
    }
    return h;
  };
  let flops = 0;
  for (let l = 0; l < layers; l++) flops += 2 * batch * dims[l]! * dims[l + 1]!;
  const nodes: OnnxGraph["nodes"] = [];
  let h = "x";
  for (let l = 0; l < layers; l++) {
    const out = l + 1 < layers ? `h${l}` : "y";
    nodes.push({ op: "MatMul", inputs: [h, `w${l}`], outputs: [`mm${l}`] });
    nodes.push({
      op: "Add",
      inputs: [`mm${l}`, `b${l}`],
      outputs: [l + 1 < layers ? `pre${l}` : out],
    });
    if (l + 1 < layers) nodes.push({ op: "Relu", inputs: [`pre${l}`], outputs: [out] });
    h = out;
  }
  return {
    name: `MLP ${dims.join("-")}, batch ${batch}`,
    unit: "GFLOP/s",
    work: flops,
    inputs,
    tol: { rtol: 1e-5, atol: 1e-5 },
    reference: plain(true),
    candidates: [
      ...kilnCandidates(
        inputs,
        (x, ...wb) => {
          let t = x;
          for (let l = 0; l < layers; l++) {
            t = add(matmul(t, wb[2 * l]!), wb[2 * l + 1]!);
            if (l + 1 < layers) t = relu(t);
          }
          return t;
        },
        { interpreter: false },
      ),
      plainCandidate(plain(false)),
      ...tfCandidates(peers, inputs, (tf, x, ...wb) => {
        let t = x;
        for (let l = 0; l < layers; l++) {
          t = tf.add(tf.matMul(t, wb[2 * l]!), wb[2 * l + 1]!);
          if (l + 1 < layers) t = tf.relu(t);
        }
        return t;
      }),
      ...ortCandidates(peers, inputs, {
        name: "mlp",
        inputs: inputs.map((x) => ({ name: x.name, shape: x.shape })),
        outputs: [{ name: "y", shape: [batch, dims[layers]!] }],
        nodes,
      }),
      jaxCandidate(peers, inputs, (np, _jax, x, ...wb) => {
        let t = x;
        for (let l = 0; l < layers; l++) {
          t = np.add(np.matmul(t, wb[2 * l]!), wb[2 * l + 1]!);
          if (l + 1 < layers) t = np.maximum(t, 0);
        }
        return t;
      }),
    ],
  };
}

// -- one GPT-2-small-like block (models/gpt2.ts GPT2Block at 768 wide, 12 heads), seq 128 ------

/** The block's weights under GPT2Block's state-dict keys, in input order after x. */
const BLOCK_KEYS = [
  "ln_1.weight",
  "ln_1.bias",
  "attn.c_attn.weight",
  "attn.c_attn.bias",
  "attn.c_proj.weight",
  "attn.c_proj.bias",
  "ln_2.weight",
  "ln_2.bias",
  "mlp.c_fc.weight",
  "mlp.c_fc.bias",
  "mlp.c_proj.weight",
  "mlp.c_proj.bias",
] as const;

function blockWorkload(peers: Peers, seq: number): Workload {
  const cfg = { ...gpt2Full, residPdrop: 0, attnPdrop: 0, embdPdrop: 0 };
  const [S, D, H] = [seq, cfg.nEmbd, cfg.nHead];
  const [Dh, F, eps] = [D / H, 4 * D, cfg.layerNormEpsilon];
  const block = new GPT2Block(cfg);
  block.eval();
  const state = block.stateDict();
  const inputs: Input[] = [{ name: "x", shape: [S, D], data: uniform(S * D, 5) }];
  BLOCK_KEYS.forEach((key, i) => {
    const shape = [...state[key]!.shape];
    const data = uniform(shape.reduce((a, b) => a * b, 1), 100 + i);
    // LayerNorm gains near 1, everything else small: activations stay O(1), as in a real model.
    const gain = key.startsWith("ln_") && key.endsWith("weight");
    const scaled = gain
      ? data.map((v) => 1 + 0.1 * v)
      : data.map((v) => v * (key.endsWith("bias") ? 0.02 : 0.05));
    inputs.push({ name: key.replaceAll(".", "_"), shape, data: scaled });
  });
  const weights: Record<string, Tensor> = {};
  BLOCK_KEYS.forEach((key, i) => {
    weights[key] = tensor(inputs[i + 1]!.data, { shape: inputs[i + 1]!.shape });
  });
  block.loadStateDict(weights);
  const kilnBlock = (x: Tensor) => block.call(x.reshape(1, S, D), null)[0];
  const mask = new Float32Array(S * S);
  for (let i = 0; i < S; i++) for (let j = i + 1; j < S; j++) mask[i * S + j] = -1e9;
  const scale = 1 / Math.sqrt(Dh);
  const gc = Math.sqrt(2 / Math.PI);
  const flops = 2 * S * D * (3 * D + D + 2 * F) + 4 * S * S * D;
  const maskedInputs = [...inputs, { name: "mask", shape: [S, S], data: mask }];

  // ONNX: the same graph node by node (opset 17 has LayerNormalization).
  const n = (op: string, ins: string[], outs: string[], attrs?: OnnxNode["attrs"]): OnnxNode =>
    attrs === undefined
      ? { op, inputs: ins, outputs: outs }
      : { op, inputs: ins, outputs: outs, attrs };
  const ln = (x: string, i: number, y: string) =>
    n("LayerNormalization", [x, `ln_${i}_weight`, `ln_${i}_bias`], [y], { axis: -1 });
  const onnxNodes: OnnxGraph["nodes"] = [
    { ...ln("x", 1, "h1"), attrs: { axis: -1, epsilon: eps }, floatAttrs: ["epsilon"] },
    n("MatMul", ["h1", "attn_c_attn_weight"], ["qkv0"]),
    n("Add", ["qkv0", "attn_c_attn_bias"], ["qkv"]),
    n("Split", ["qkv", "split3"], ["q0", "k0", "v0"], { axis: 1 }),
    n("Reshape", ["q0", "heads"], ["q1"]),
    n("Transpose", ["q1"], ["q"], { perm: [1, 0, 2] }),
    n("Reshape", ["k0", "heads"], ["k1"]),
    n("Transpose", ["k1"], ["kt"], { perm: [1, 2, 0] }),
    n("Reshape", ["v0", "heads"], ["v1"]),
    n("Transpose", ["v1"], ["v"], { perm: [1, 0, 2] }),
    n("MatMul", ["q", "kt"], ["s0"]),
    n("Mul", ["s0", "scale"], ["s1"]),
    n("Add", ["s1", "mask"], ["s2"]),
    n("Softmax", ["s2"], ["p"], { axis: -1 }),
    n("MatMul", ["p", "v"], ["o0"]),
    n("Transpose", ["o0"], ["o1"], { perm: [1, 0, 2] }),
    n("Reshape", ["o1", "merged"], ["o2"]),
    n("MatMul", ["o2", "attn_c_proj_weight"], ["a0"]),
    n("Add", ["a0", "attn_c_proj_bias"], ["a"]),
    n("Add", ["x", "a"], ["h"]),
    { ...ln("h", 2, "h2"), attrs: { axis: -1, epsilon: eps }, floatAttrs: ["epsilon"] },
    n("MatMul", ["h2", "mlp_c_fc_weight"], ["f0"]),
    n("Add", ["f0", "mlp_c_fc_bias"], ["u"]),
    n("Mul", ["u", "u"], ["u2"]),
    n("Mul", ["u2", "u"], ["u3"]),
    n("Mul", ["u3", "c044"], ["u3c"]),
    n("Add", ["u", "u3c"], ["inner0"]),
    n("Mul", ["inner0", "gc"], ["inner"]),
    n("Tanh", ["inner"], ["th"]),
    n("Add", ["th", "one"], ["th1"]),
    n("Mul", ["u", "half"], ["uh"]),
    n("Mul", ["uh", "th1"], ["g"]),
    n("MatMul", ["g", "mlp_c_proj_weight"], ["m0"]),
    n("Add", ["m0", "mlp_c_proj_bias"], ["m"]),
    n("Add", ["h", "m"], ["y"]),
  ];

  return {
    name: `GPT-2-small block (768 wide, 12 heads), seq ${S}, batch 1`,
    unit: "GFLOP/s",
    work: flops,
    inputs,
    tol: { rtol: 1e-4, atol: 1e-5 },
    // The reference evaluator (Kiln's oracle) through the interpreter backend: one slow run.
    reference: () => {
      const xs = inputs.map((x) => tensor(x.data, { shape: x.shape }));
      const cf = compile(kilnBlock, { backend: "interpreter", cache: "off" });
      return cf(xs[0]!).data() as Float32Array;
    },
    candidates: [
      ...kilnCandidates(inputs, kilnBlock, { interpreter: false }),
      ...tfCandidates(peers, maskedInputs, (tf, x, ...w) => {
        const [l1w, l1b, wqkv, bqkv, wo, bo, l2w, l2b, wfc, bfc, wpr, bpr, m] = w as [
          TfTensor, TfTensor, TfTensor, TfTensor, TfTensor, TfTensor, TfTensor,
          TfTensor, TfTensor, TfTensor, TfTensor, TfTensor, TfTensor,
        ];
        const s = (v: number) => tf.scalar(v);
        const norm = (t: TfTensor, g: TfTensor, b: TfTensor) => {
          const c = tf.sub(t, tf.mean(t, -1, true));
          const v = tf.mean(tf.mul(c, c), -1, true);
          return tf.add(tf.mul(tf.div(c, tf.sqrt(tf.add(v, s(eps)))), g), b);
        };
        const lin = (t: TfTensor, wt: TfTensor, b: TfTensor) => tf.add(tf.matMul(t, wt), b);
        const [q0, k0, v0] = tf.split(lin(norm(x, l1w, l1b), wqkv, bqkv), 3, 1) as [
          TfTensor, TfTensor, TfTensor,
        ];
        const heads = (t: TfTensor, perm: number[]) =>
          tf.transpose(tf.reshape(t, [S, H, Dh]), perm);
        const scores = tf.add(
          tf.mul(tf.matMul(heads(q0, [1, 0, 2]), heads(k0, [1, 2, 0])), s(scale)),
          m,
        );
        const o = tf.matMul(tf.softmax(scores), heads(v0, [1, 0, 2]));
        const h = tf.add(x, lin(tf.reshape(tf.transpose(o, [1, 0, 2]), [S, D]), wo, bo));
        const u = lin(norm(h, l2w, l2b), wfc, bfc);
        const inner = tf.mul(tf.add(u, tf.mul(tf.mul(tf.mul(u, u), u), s(0.044715))), s(gc));
        const g = tf.mul(tf.mul(u, s(0.5)), tf.add(tf.tanh(inner), s(1)));
        return tf.add(h, lin(g, wpr, bpr));
      }),
      ...ortCandidates(peers, inputs, {
        name: "gpt2_block",
        inputs: inputs.map((x) => ({ name: x.name, shape: x.shape })),
        outputs: [{ name: "y", shape: [S, D] }],
        constants: [
          int64("split3", [D, D, D]),
          int64("heads", [S, H, Dh]),
          int64("merged", [S, D]),
          float32("scale", [scale], []),
          { name: "mask", shape: [S, S], values: mask },
          float32("c044", [0.044715], []),
          float32("gc", [gc], []),
          float32("one", [1], []),
          float32("half", [0.5], []),
        ],
        nodes: onnxNodes,
      }),
      jaxCandidate(peers, maskedInputs, (np, jax, x, ...w) => {
        const [l1w, l1b, wqkv, bqkv, wo, bo, l2w, l2b, wfc, bfc, wpr, bpr, m] = w as [
          JaxArray, JaxArray, JaxArray, JaxArray, JaxArray, JaxArray, JaxArray,
          JaxArray, JaxArray, JaxArray, JaxArray, JaxArray, JaxArray,
        ];
        // jax-js moves an array into each op: `.ref` on every use but the last.
        const norm = (t: JaxArray, g: JaxArray, b: JaxArray) => {
          const c = np.subtract(t.ref, np.mean(t, -1, { keepdims: true }));
          const v = np.mean(np.multiply(c.ref, c.ref), -1, { keepdims: true });
          return np.add(np.multiply(np.trueDivide(c, np.sqrt(np.add(v, eps))), g), b);
        };
        const lin = (t: JaxArray, wt: JaxArray, b: JaxArray) => np.add(np.matmul(t, wt), b);
        const [q0, k0, v0] = np.split(lin(norm(x.ref, l1w, l1b), wqkv, bqkv), 3, 1) as [
          JaxArray, JaxArray, JaxArray,
        ];
        const heads = (t: JaxArray, perm: number[]) =>
          np.transpose(np.reshape(t, [S, H, Dh]), perm);
        const scores = np.add(
          np.multiply(np.matmul(heads(q0, [1, 0, 2]), heads(k0, [1, 2, 0])), scale),
          m,
        );
        const o = np.matmul(jax.nn.softmax(scores, -1), heads(v0, [1, 0, 2]));
        const h = np.add(x, lin(np.reshape(np.transpose(o, [1, 0, 2]), [S, D]), wo, bo));
        const u = lin(norm(h.ref, l2w, l2b), wfc, bfc);
        const u3 = np.multiply(np.multiply(u.ref, u.ref), u.ref);
        const inner = np.multiply(np.add(u.ref, np.multiply(u3, 0.044715)), gc);
        const g = np.multiply(np.multiply(u, 0.5), np.add(np.tanh(inner), 1));
        return np.add(h, lin(g, wpr, bpr));
      }),
    ],
  };
}

// -- whole models from models/ (Kiln rows only, cross-checked against Kiln eager) ---------------

/**
 * Which configs the model workloads use: the zoo's "full" ones, or in --quick "small" ones —
 * the zoo's tiny configs 128 wide (vocabulary 1000, 256 positions, 2 layers) so seq 128 fits;
 * ResNet's tiny config as is.
 */
const ZOO = QUICK ? "small" : "full";
const GPT2_CONFIG: gpt2.GPT2Config = QUICK
  ? { ...gpt2.tinyConfig, vocabSize: 1000, nPositions: 256, nEmbd: 128 }
  : gpt2.fullConfig;
const BERT_CONFIG: bert.BertConfig = QUICK
  ? {
      ...bert.tinyConfig,
      vocabSize: 1000,
      hiddenSize: 128,
      intermediateSize: 512,
      maxPositionEmbeddings: 256,
    }
  : bert.fullConfig;
const RESNET_CONFIG: resnet.ResNetConfig = QUICK ? resnet.tinyConfig : resnet.fullConfig;
/** Whole-model forward passes: the cross-check run is the warm-up; a few timed runs. */
const MODEL_TIMING: TimingOptions = QUICK
  ? { warmup: 0, budgetMs: 300, minRuns: 3, maxRuns: 20 }
  : { warmup: 0, budgetMs: 2000, minRuns: 3, maxRuns: 10 };
const MODEL_TOL: Tolerance = { rtol: 1e-3, atol: 1e-4 };

function toF32(t: Tensor): Float32Array {
  const d = t.data();
  if (d instanceof Float32Array) return d;
  const out = new Float32Array(d.length);
  for (let i = 0; i < d.length; i++) out[i] = Number(d[i]);
  return out;
}

/**
 * Kiln eager, lazy and compiled (js) on a model's forward `f` over fixed arguments. Lazy runs
 * the whole forward as one graph (no depth cut), as compile() does.
 */
function kilnModelCandidates(args: Tensor[], f: (...xs: Tensor[]) => Tensor): Candidate[] {
  return [
    { runtime: "Kiln eager", prepare: async () => () => toF32(f(...args)) },
    {
      runtime: "Kiln lazy",
      prepare: async () => () => toF32(lazy(() => f(...args), { maxDepth: 1e9 })),
    },
    {
      runtime: BASELINE,
      prepare: async () => {
        const cf = compile(f, { backend: "js", cache: "memory", fullgraph: true });
        return () => toF32(cf(...args));
      },
    },
  ];
}

function modelWorkload(
  name: string,
  args: Tensor[],
  f: (...xs: Tensor[]) => Tensor,
): Workload {
  return {
    name,
    inputs: [],
    tol: MODEL_TOL,
    reference: () => toF32(f(...args)),
    candidates: kilnModelCandidates(args, f),
    timing: MODEL_TIMING,
  };
}

/** A zoo model in eval mode (no dropout), its random init timed for the log. */
function evalModel<M extends { eval(): unknown }>(what: string, make: () => M): M {
  const t0 = performance.now();
  const m = make();
  m.eval();
  process.stderr.write(`  ${what}: random init ${(performance.now() - t0).toFixed(0)} ms\n`);
  return m;
}

let gpt2Model: gpt2.GPT2 | undefined;
function gpt2Shared(): gpt2.GPT2 {
  gpt2Model ??= evalModel(`GPT-2 (${ZOO})`, () => gpt2.default(GPT2_CONFIG));
  return gpt2Model;
}

const GPT2_SEQ = 128;
function gpt2Forward(): [Tensor[], (ids: Tensor) => Tensor] {
  const model = gpt2Shared();
  const [ids] = gpt2.inputs({ batch: 1, seq: GPT2_SEQ }, GPT2_CONFIG);
  return [[ids], (x: Tensor) => model.call(x).logits];
}

function gpt2Workload(): Workload {
  const [args, f] = gpt2Forward();
  return modelWorkload(`GPT-2 (${ZOO}) forward, logits, seq ${GPT2_SEQ}, batch 1`, args, f);
}

const BERT_SEQ = 128;
function bertForward(): [Tensor[], (ids: Tensor, mask: Tensor) => Tensor] {
  const model = evalModel(`BERT (${ZOO})`, () => bert.default(BERT_CONFIG));
  const [ids, { attentionMask }] = bert.inputs({ batch: 1, seq: BERT_SEQ }, BERT_CONFIG);
  return [
    [ids, attentionMask!],
    (x: Tensor, m: Tensor) => model.call(x, { attentionMask: m }).lastHiddenState,
  ];
}

function bertWorkload(): Workload {
  const [args, f] = bertForward();
  const name = `BERT-style encoder (${ZOO}), last hidden state, seq ${BERT_SEQ}, batch 1`;
  return modelWorkload(name, args, (...xs) => f(xs[0]!, xs[1]!));
}

const RESNET_INPUT = { batch: 8, size: 64 };
const RESNET_SIZE = QUICK ? "tiny" : "full";
function resnetForward(): [Tensor[], (x: Tensor) => Tensor] {
  const model = evalModel(`ResNet (${RESNET_SIZE})`, () => resnet.default(RESNET_CONFIG));
  return [resnet.inputs(RESNET_INPUT, RESNET_CONFIG), (x: Tensor) => model.call(x)];
}

function resnetWorkload(): Workload {
  const [args, f] = resnetForward();
  const name = `ResNet-18-style CNN (${RESNET_SIZE}), logits, 8x3x64x64`;
  return modelWorkload(name, args, (...xs) => f(xs[0]!));
}

const GEN_TOKENS = 32;
const GEN_PROMPT = 8;

/**
 * Greedy generation of 32 tokens after an 8-token prompt; the output is the ids (prompt and
 * new tokens), which every row must reproduce exactly. Eager and lazy use the growing KV cache;
 * compiled uses the static cache, so one program serves every step after the prompt.
 */
function generateWorkload(): Workload {
  const model = gpt2Shared();
  const [ids] = gpt2.inputs({ batch: 1, seq: GEN_PROMPT }, GPT2_CONFIG);
  const eager = () => toF32(model.generate(ids, { maxNewTokens: GEN_TOKENS }));
  return {
    name: `GPT-2 (${ZOO}) greedy generation, ${GEN_TOKENS} tokens after ${GEN_PROMPT}, batch 1`,
    inputs: [],
    tol: { rtol: 0, atol: 0 },
    reference: eager,
    // One timed run is enough for the slow lazy row in --quick (seconds per run).
    timing: QUICK ? { ...MODEL_TIMING, minRuns: 1 } : MODEL_TIMING,
    noteFor: (ms) => `${(ms / GEN_TOKENS).toFixed(2)} ms/token`,
    candidates: [
      { runtime: "Kiln eager", prepare: async () => eager },
      {
        runtime: "Kiln lazy",
        prepare: async () => {
          // Nothing is observed between steps, so every step's pending graph is new (the KV
          // cache grows) and compiles: 30-100x eager at the quick config, minutes at GPT-2 small.
          if (!QUICK) throw new Skip("compiles every step (see --quick); minutes per run here");
          return () => toF32(lazy(() => model.generate(ids, { maxNewTokens: GEN_TOKENS })));
        },
      },
      {
        runtime: BASELINE,
        prepare: async () => {
          const forward = compile(
            (x: Tensor, o: gpt2.GPT2ForwardOptions) => model.call(x, o),
            { backend: "js", cache: "memory" },
          );
          const opts = { maxNewTokens: GEN_TOKENS, staticCache: true, forward };
          return () => toF32(model.generate(ids, opts));
        },
      },
    ],
  };
}

// -- compile time per model: cold, and warm from the disk cache in a fresh process -------------

class Captured extends Error {
  constructor(readonly module: Module) {
    super("bench: graph captured");
  }
}

/** Records the module lazy mode hands to the cache, and stops before compiling it. */
class CapturingCache extends ProgramCache {
  override getOrCompile(module: Module): CacheResult {
    throw new Captured(module);
  }
}

/** A forward pass's whole graph as lazy mode builds it (the module compileModule gets). */
function capture(f: () => Tensor): Module {
  // The lazy rows ran this graph already; its remembered structure would skip the cache.
  clearLazyGraphs();
  try {
    const opts = { backend: "js", cache: new CapturingCache({ disk: false }), maxDepth: 1e9 };
    lazy(f, opts).data();
  } catch (e) {
    const c = e instanceof Captured ? e : e instanceof Error ? e.cause : undefined;
    if (c instanceof Captured) return c.module;
    throw e;
  }
  throw new Error("bench: lazy mode compiled nothing");
}

const COMPILE_SCRIPT = join(here, "..", "compile.ts");

/** bench/compile.ts's child mode: compileModule on `keyFile`'s module through `dir`'s cache. */
function childCompile(keyFile: string, dir: string): { hit: string; ms: number } {
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", COMPILE_SCRIPT, "--child", keyFile, dir],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`compile child failed: ${r.stderr.split("\n")[0]}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!) as { hit: string; ms: number };
}

const COLD = "cold (this process)";

/**
 * Compile time of one model's forward graph on the js backend: cold in this process (a fresh
 * ProgramCache on a fresh temp directory: passes, codegen, store), cold in a new process, and
 * warm in a new process on the populated directory (fingerprint, read, load). Each timing is
 * the median of `reps` runs, each on its own directory (cold) or the same one (warm). A cold
 * run includes storing the entry; the new-process figures exclude Node and tsx start-up.
 */
async function compileTime(name: string, f: () => Tensor): Promise<WorkloadResult> {
  const reps = 3;
  const module = capture(f);
  const count = module.computations.reduce((n, c) => n + c.instructions.length, 0);
  const result: WorkloadResult = {
    name: `compile time (js), ms of compileModule: ${name} (${count} instructions)`,
    baseline: COLD,
    rows: [],
  };
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-peers-compile-"));
  try {
    const keyFile = join(dir, "key.pb");
    writeFileSync(keyFile, moduleToProto(module));
    const cold: number[] = [];
    for (let i = 0; i < reps; i++) {
      const cache = new ProgramCache({ disk: join(dir, `cold${i}`) });
      const t0 = performance.now();
      const r = compileModule(module, { backend: "js", cache });
      cold.push(performance.now() - t0);
      if (r.hit !== "miss") throw new Error(`bench: cold compile was a ${r.hit}`);
    }
    const children = (hit: string, dirOf: (i: number) => string) =>
      Array.from({ length: reps }, (_, i) => {
        const c = childCompile(keyFile, dirOf(i));
        if (c.hit !== hit) throw new Error(`bench: child compile was a ${c.hit}, not ${hit}`);
        return c.ms;
      });
    const coldChild = children("miss", (i) => join(dir, `child${i}`));
    const warmChild = children("disk", () => join(dir, "cold0"));
    for (const [runtime, times] of [
      [COLD, cold],
      ["cold (new process)", coldChild],
      ["warm from the disk cache (new process)", warmChild],
    ] as const) {
      result.rows.push({ runtime, timing: summarize(times) });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stderr.write(`  ${result.name} done\n`);
  return result;
}

async function compileTimes(): Promise<WorkloadResult[]> {
  const [gArgs, g] = gpt2Forward();
  const [bArgs, b] = bertForward();
  const [rArgs, r] = resnetForward();
  return [
    await compileTime(`GPT-2 (${ZOO}) forward, seq ${GPT2_SEQ}`, () => g(gArgs[0]!)),
    await compileTime(`BERT (${ZOO}), seq ${BERT_SEQ}`, () => b(bArgs[0]!, bArgs[1]!)),
    await compileTime(`ResNet (${RESNET_SIZE}), 8x3x64x64`, () => r(rArgs[0]!)),
  ];
}

// ---- running ---------------------------------------------------------------------------------

async function runWorkload(w: Workload): Promise<WorkloadResult> {
  const ref = w.reference();
  const result: WorkloadResult = { name: w.name, baseline: BASELINE, rows: [] };
  if (w.unit !== undefined) result.unit = w.unit;
  if (w.work !== undefined) result.work = w.work;
  for (const c of w.candidates) {
    const row: Row = { runtime: c.runtime };
    result.rows.push(row);
    try {
      const run = await c.prepare();
      const check = crossCheck(await run(), ref, w.tol);
      row.maxAbsDiff = check.maxAbsDiff;
      if (!check.ok) {
        row.note = `MISMATCH, not timed: ${check.why}`;
        continue;
      }
      row.timing = await measure(run, w.timing ?? TIMING);
      if (w.noteFor) row.note = w.noteFor(row.timing.medianMs);
    } catch (e) {
      row.note = e instanceof Skip ? `skipped: ${e.message}` : `error: ${message(e)}`;
    }
    process.stderr.write(`  ${w.name}: ${c.runtime} done\n`);
  }
  return result;
}

function machine(): Record<string, string | number> {
  const info = readFileSafe("/proc/cpuinfo");
  const model = /model name\s*:\s*(.*)/.exec(info)?.[1] ?? cpus()[0]?.model ?? "unknown";
  const flags = /flags\s*:\s*(.*)/.exec(info)?.[1]?.split(" ") ?? [];
  const simd = ["avx512f", "avx2", "fma", "avx", "sse4_2", "asimd"].filter((f) =>
    flags.includes(f),
  );
  const kiln = JSON.parse(readFileSync(join(here, "..", "..", "package.json"), "utf8")) as {
    version: string;
  };
  return {
    cpu: model,
    cores: cpus().length,
    mhz: Math.round(nominalMHz()),
    simd: simd.join(" "),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    kiln: kiln.version,
    kilnCommit: gitCommit(),
    // Other work on the machine skews every row; the load at the end says how busy it was.
    loadAverage1m: Number(loadavg()[0]!.toFixed(2)),
  };
}

/**
 * This CPU's physical ceiling, for reading the tables: peak f32 FLOP/s from the vector width
 * the CPU flags advertise × 2 (fused multiply-add) × FMA_PIPES × the nominal clock × cores, and
 * memory bandwidth measured with a copy of a buffer larger than any cache (bytes read + bytes
 * written per second), once with TypedArray.set (memcpy) and once with a plain JS loop.
 */
const FMA_PIPES = 2; // Zen 4/5, Ice Lake server and later: two FMA units per core (assumed)

async function ceiling(quick: boolean): Promise<Record<string, number | string>> {
  const flags = /flags\s*:\s*(.*)/.exec(readFileSafe("/proc/cpuinfo"))?.[1]?.split(" ") ?? [];
  const lanes = flags.includes("avx512f") ? 16 : flags.includes("avx") ? 8 : 4;
  const ghz = nominalMHz() / 1000;
  const perCore = lanes * 2 * FMA_PIPES * ghz;
  const n = (quick ? 32 : 64) * 2 ** 20; // floats: 128 or 256 MiB, past any L3
  const src = uniform(n, 3);
  const dst = new Float32Array(n);
  const opts: TimingOptions = { warmup: 1, budgetMs: 0, minRuns: quick ? 3 : 5, maxRuns: 5 };
  const memcpy = await measure(() => dst.set(src), opts);
  const loop = await measure(() => {
    for (let i = 0; i < n; i++) dst[i] = src[i]!;
  }, opts);
  const gbs = (ms: number) => (2 * 4 * n) / (ms * 1e6);
  return {
    vectorLanesF32: lanes,
    fmaPipesAssumed: FMA_PIPES,
    nominalGHz: ghz,
    peakGflopsPerCore: Math.round(perCore),
    peakGflopsAllCores: Math.round(perCore * cpus().length),
    copyGBsMemcpy: Number(gbs(memcpy.medianMs).toFixed(1)),
    copyGBsJsLoop: Number(gbs(loop.medianMs).toFixed(1)),
  };
}

/** The clock the kernel reports (the base clock under a hypervisor; boost can exceed it). */
function nominalMHz(): number {
  const fromProc = Number(/cpu MHz\s*:\s*([\d.]+)/.exec(readFileSafe("/proc/cpuinfo"))?.[1]);
  return Number.isFinite(fromProc) && fromProc > 0 ? fromProc : (cpus()[0]?.speed ?? 0);
}

function readFileSafe(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function gitCommit(): string {
  try {
    const opts = { cwd: here, stdio: ["ignore", "pipe", "ignore"] as ("ignore" | "pipe")[] };
    return execSync("git rev-parse --short HEAD", opts)
      .toString()
      .trim();
  } catch {
    return "unknown";
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const peers = await loadPeers();
  const sizes = QUICK ? [256, 512] : [256, 512, 1024];
  const ewN = QUICK ? 1 << 20 : 4 << 20;
  const all: [string, () => Workload][] = [
    ...sizes.map((n): [string, () => Workload] => ["matmul", () => matmulWorkload(peers, n)]),
    ["elementwise", () => elementwiseWorkload(peers, ewN)],
    ["mlp", () => mlpWorkload(peers, 64, [784, 1024, 1024, 10])],
    ["block", () => blockWorkload(peers, 128)],
    ["gpt2", gpt2Workload],
    ["bert", bertWorkload],
    ["resnet", resnetWorkload],
    ["generate", generateWorkload],
  ];
  const results: WorkloadResult[] = [];
  for (const [kind, make] of all) {
    if (ONLY && !ONLY.includes(kind)) continue;
    const r = await runWorkload(make());
    results.push(r);
    console.log(`\n${textTable(r)}`);
  }
  if (!ONLY || ONLY.includes("compile")) {
    for (const r of await compileTimes()) {
      results.push(r);
      console.log(`\n${textTable(r)}`);
    }
  }
  const m = machine();
  const ceil = await ceiling(QUICK);
  console.log(`\nthis CPU's ceiling: ${JSON.stringify(ceil)}`);
  const report = {
    date: new Date().toISOString(),
    mode: QUICK ? "quick" : "full",
    machine: m,
    ceiling: ceil,
    versions: peers.versions,
    missingPeers: peers.missing,
    timing: TIMING,
    baseline: BASELINE,
    workloads: results.map((w) => ({
      ...w,
      rows: w.rows.map((r) => ({ ...r, rate: rate(w, r), ratio: ratio(w, r) })),
    })),
    seconds: (performance.now() - started) / 1000,
  };
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, "latest.json"), `${JSON.stringify(report, null, 2)}\n`);
  const md = [
    "# Kiln side-by-side benchmarks — latest run",
    "",
    `Written by \`bench/peers/run.ts\` (${report.mode} mode) on ${report.date}, in ` +
      `${report.seconds.toFixed(0)} s. Ratios are median time / median time of ${BASELINE} ` +
      "(above 1: slower than Kiln compiled). Spread is (p90 - p10) / median of the timed runs.",
    "",
    "| machine | |",
    "| --- | --- |",
    ...Object.entries(m).map(([k, v]) => `| ${k} | ${v} |`),
    ...Object.entries(peers.versions).map(([k, v]) => `| ${k} | ${v} |`),
    ...Object.entries(peers.missing).map(([k, v]) => `| ${k} | missing: ${v} |`),
    "",
    "| this CPU's ceiling | |",
    "| --- | --- |",
    ...Object.entries(ceil).map(([k, v]) => `| ${k} | ${v} |`),
    "",
    ...results.flatMap((w) => [`## ${w.name}`, "", markdownTable(w), ""]),
  ].join("\n");
  writeFileSync(join(OUT, "latest.md"), md);
  console.log(`\nwrote ${join(OUT, "latest.json")} and latest.md (${report.seconds.toFixed(0)} s)`);
}

await main();
