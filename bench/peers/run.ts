// Side-by-side benchmarks: Kiln (eager and lazy on the default backend; compiled on native at
// one thread and at all threads, and on js) against the runtimes a TypeScript user would pick
// instead — TensorFlow.js (cpu and wasm backends), onnxruntime-node (one thread and all
// threads), jax-js (jit on its wasm backend) — and a hand-written plain-JS loop, on the same
// inputs. Each runtime group runs in its own child process per workload (each Kiln row in a
// process of its own, native's sized by KILN_NUM_THREADS), so no runtime inherits another's
// heap, thread pool, JIT state or global backend; the parent builds each workload's inputs and
// reference once, hands the reference (and, for the model workloads, the captured HLO module
// and its parameters) to the children through a temporary directory, checks that every child
// built the very same inputs (a hash), and merges the rows into one table per workload,
// bench/results/latest.json and latest.md. A Kiln row that states its thread count also gets
// its ratio to onnxruntime at that count: the issue's targets are stated that way. Every
// runtime's result is cross-checked against the reference before it is timed; one that
// disagrees is reported with its difference and not timed. Peers come from
// bench/peers/node_modules (`npm --prefix bench/peers ci`); a missing peer or native backend,
// or a child that crashes, is a row that says so, never a download or a stopped run. Nothing
// here is used by tests except harness.ts.
//
//   npm run bench                  (installs the peers if needed, then this with --quick off)
//   npx tsx bench/peers/run.ts [--quick] [--out DIR]
//       [--only matmul,elementwise,mlp,block,gpt2,bert,resnet,generate,compile]
//
// The model workloads (gpt2, bert, resnet, generate) run on the peers through the HLO module
// Kiln captures for the model's forward (bench/peers/hlo_onnx.ts, hlo_tfjs.ts, hlo_jax.ts):
// the same graph and the same weights on every runtime. --quick runs them on small configs
// (same input shapes; see ZOO below), the full run on the zoo's "full" configs (GPT-2 small,
// BERT-base, ResNet-18).

import { execSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  add,
  cacheStats,
  clearLazyGraphs,
  compile,
  gelu,
  lazy,
  manualSeed,
  matmul,
  mul,
  relu,
  resetCacheStats,
  setEagerBackend,
  sigmoid,
  type Tensor,
  tensor,
} from "../../index.ts";
import { Literal, type LiteralData, storageCtor } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import type { ElementType } from "../../ir/shape.ts";
import { bert, gpt2, resnet } from "../../models/index.ts";
import { fullConfig as gpt2Full, GPT2Block } from "../../models/gpt2.ts";
import { compileModule } from "../../runtime/compile.ts";
import { backendNames, getBackend, ProgramCache } from "../../runtime/index.ts";
import { nativeThreads, setNativeThreads } from "../../runtime/native/backend.ts";
import {
  setWasmThreads,
  wasmThreads,
  wasmThreadsUnavailable,
} from "../../runtime/wasm/threads.ts";
import { nativeCacheDir } from "../../runtime/native/libcache.ts";
import { describeCompiler, nativeStatus } from "../../runtime/native/toolchain.ts";
import {
  crossCheck,
  hashArrays,
  type HashedArray,
  jsonRow,
  markdownTable,
  measure,
  ortRatio,
  ortRuntime,
  rate,
  ratio,
  type Row,
  summarize,
  textTable,
  threadsText,
  type TimingOptions,
  type Tolerance,
  uniform,
  type WorkloadResult,
} from "./harness.ts";
import { float32, int64, type OnnxGraph, type OnnxNode, onnxModel } from "./onnx.ts";
import { setGradEnabled } from "../../tensor/autograd.ts";
import { captureGraph, type CapturedGraph } from "./train_graph.ts";

// Inference only: no autograd recording (as PyTorch benchmarks run under no_grad), so
// parameters that require grad do not keep every activation of a forward alive.
setGradEnabled(false);


const here = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(here, "..", "..");
const SELF = fileURLToPath(import.meta.url);
const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick");
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const ONLY = flag("only")?.split(",");
const OUT = resolve(flag("out") ?? join(here, "..", "results"));
/** Set in a child process: the runtime group it runs, the workload, the exchange directory. */
const CHILD = flag("child");
// --quick's budgets are small because it must stay under 3 minutes on 2 cores with a process
// per row; its figures are a smoke test, the full run's are the record.
const TIMING: TimingOptions = QUICK
  ? { warmup: 1, budgetMs: 250, minRuns: 3, maxRuns: 30 }
  : { warmup: 3, budgetMs: 2500, minRuns: 7, maxRuns: 200 };
const BASELINE = "Kiln compiled (js)";
/**
 * A model workload's row whose cross-check run took longer than this is timed with one more
 * run only (tfjs's cpu backend needs tens of seconds per full-size model forward), or by the
 * cross-check run itself when its preparation already ran the work once; the note says which.
 * In --quick an array workload's row is timed by one run when a second run is this slow too.
 */
const SLOW_RUN_MS = QUICK ? 3000 : 10_000;
/** The longest a child may take before it is stopped and its rows say so. */
const CHILD_TIMEOUT_MS = (QUICK ? 3 : 20) * 60_000;
/** What a child prints before its JSON on stdout, so other output cannot be mistaken for it. */
const RESULT_MARK = "KILN_BENCH_CHILD_RESULT ";

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
type OrtType = "float32" | "int32" | "int64" | "uint8" | "bool";
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
interface Ort {
  Tensor: new (type: OrtType, data: LiteralData, dims: number[]) => OrtTensor;
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

const PEER_PACKAGES = [
  "@tensorflow/tfjs-core",
  "@tensorflow/tfjs-backend-cpu",
  "@tensorflow/tfjs-backend-wasm",
  "onnxruntime-node",
  "@jax-js/jax",
] as const;
const NOT_INSTALLED = "not installed (npm --prefix bench/peers ci)";

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

/** Installed peer versions, and the peers that are not installed (resolved, not loaded). */
function peerVersions(): { versions: Record<string, string>; missing: Record<string, string> } {
  const versions: Record<string, string> = {};
  const missing: Record<string, string> = {};
  for (const pkg of PEER_PACKAGES) {
    try {
      versions[pkg] = peerVersion(pkg);
    } catch {
      missing[pkg] = NOT_INSTALLED;
    }
  }
  return { versions, missing };
}

function message(e: unknown): string {
  return e instanceof Error ? e.message.split("\n")[0]! : String(e);
}

/** A row that could not run for a reason outside the runtime (not installed, over a cap). */
class Skip extends Error {}
/** A translator (bench/peers/hlo_*.ts) could not express the module for this peer. */
class NotTranslatable extends Error {}

async function importPeer(pkg: string): Promise<unknown> {
  // Resolved from bench/peers, so the root install never needs the peers.
  let path: string;
  try {
    path = peerRequire.resolve(pkg);
  } catch {
    throw new Skip(`${pkg} ${NOT_INSTALLED}`);
  }
  return import(pathToFileURL(path).href);
}

async function loadTf(backend: "cpu" | "wasm"): Promise<Tf> {
  const tf = (await importPeer("@tensorflow/tfjs-core")) as Tf;
  if (backend === "cpu") {
    await importPeer("@tensorflow/tfjs-backend-cpu");
  } else {
    const wasm = (await importPeer("@tensorflow/tfjs-backend-wasm")) as {
      setWasmPaths(prefix: string): void;
    };
    // The .wasm files ship in the package; load them from node_modules, never a CDN.
    wasm.setWasmPaths(join(dirname(peerRequire.resolve("@tensorflow/tfjs-backend-wasm")), "/"));
  }
  if (!(await tf.setBackend(backend))) throw new Skip(`tfjs backend ${backend} failed to start`);
  await tf.ready();
  return tf;
}

async function loadOrt(): Promise<Ort> {
  return (await importPeer("onnxruntime-node")) as Ort;
}

async function loadJax(): Promise<Jax> {
  const jax = (await importPeer("@jax-js/jax")) as Jax;
  // Only the wasm device: jax-js's "cpu" device is its reference interpreter (minutes for a
  // 512 matmul), and asking init() for every device probes WebGPU, absent in Node.
  const got = await jax.init("wasm");
  if (!got.includes("wasm")) throw new Error("jax-js: the wasm device did not initialize");
  jax.defaultDevice("wasm");
  return jax;
}

// ---- runtime groups: one child process each, per workload ------------------------------------

/** All threads, counted as the C runtime's default pool counts them (the affinity mask). */
const THREADS = availableParallelism();
const GROUPS = ["kiln", "tfjs-cpu", "tfjs-wasm", "ort-1", "ort-all", "jax"] as const;
type Group = (typeof GROUPS)[number];

/** The row a group's runtime gets (for Kiln, the name of a crash row: it has several). */
function groupRuntime(g: Group): string {
  switch (g) {
    case "kiln":
      return "Kiln (every Kiln row, plain JS)";
    case "tfjs-cpu":
      return "tfjs cpu";
    case "tfjs-wasm":
      return "tfjs wasm";
    case "ort-1":
      return ortRuntime(1);
    case "ort-all":
      return ortRuntime(THREADS);
    case "jax":
      return "jax-js jit (wasm)";
    default: {
      const never: never = g;
      throw new Error(`unknown group ${String(never)}`);
    }
  }
}

/** The groups a run uses: all threads only where that differs from one thread. */
function activeGroups(): Group[] {
  return GROUPS.filter((g) => g !== "ort-all" || THREADS > 1);
}

function ortThreads(g: Group): number {
  return g === "ort-all" ? THREADS : 1;
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
  /**
   * prepare() already ran the work once (compiles and caches are warm), so the cross-check run
   * is a fair timed run: a slow row is then timed by that run alone.
   */
  warm?: boolean;
  /** Text put before the timing note (e.g. how this row does the work). */
  note?: string;
  /** The native pool size the row runs with (its process gets KILN_NUM_THREADS too). */
  threads?: number;
  /**
   * Why the row is known not to run before anything is prepared (native unavailable): the
   * group's first child reports it, so it costs no process of its own.
   */
  skip?: string;
}

/** What a child computes for its group: the inputs' hash and the candidates to run. */
interface ChildPlan {
  hash: string;
  candidates: Candidate[];
}

/**
 * A workload as both sides see it. The parent calls `prepare` (builds the inputs, computes the
 * reference, writes what the children need into `dir`, returns the inputs' hash); a child calls
 * `plan` for its group (builds or reads the same inputs, hashes them).
 */
interface Workload {
  name: string;
  unit?: "GFLOP/s" | "GB/s";
  work?: number;
  /** The row ratios are taken against (default BASELINE). */
  baseline?: string;
  tol: Tolerance;
  timing?: TimingOptions;
  /** Text for every timed row's note, from its timing (e.g. per-token latency). */
  noteFor?: (medianMs: number) => string;
  prepare: (dir: string) => Promise<string>;
  plan: (group: Group, dir: string) => Promise<ChildPlan>;
}

/** A workload under its id; `make` is called only in the process that needs it. */
interface WorkloadEntry {
  id: string;
  /** The --only name. */
  kind: string;
  make: () => Workload;
}

// -- files the parent and the children exchange ------------------------------------------------

const REF_FILE = "reference.f32";

function writeF32(path: string, data: Float32Array): void {
  writeFileSync(path, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

function readF32(path: string): Float32Array {
  const b = readFileSync(path);
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

function inputsHash(inputs: readonly Input[]): string {
  return hashArrays(inputs.map((x) => ({ label: `${x.name} f32[${x.shape}]`, data: x.data })));
}

function literalsHash(params: readonly Literal[]): string {
  const arrays: HashedArray[] = params.map((p, i) => ({
    label: `param ${i} ${p.type}[${p.dims.join(",")}]`,
    data: p.data,
  }));
  return hashArrays(arrays);
}

interface ParamMeta {
  type: ElementType;
  dims: number[];
  offset: number;
  bytes: number;
}

/** The captured module (proto), its parameters (raw bytes + a JSON index) and extra facts. */
function writeGraph(dir: string, g: CapturedGraph, extra: Record<string, number>): void {
  writeFileSync(join(dir, "module.pb"), moduleToProto(g.module));
  const metas: ParamMeta[] = [];
  let offset = 0;
  for (const p of g.params) {
    const bytes = p.data.byteLength;
    metas.push({ type: p.type, dims: [...p.dims], offset, bytes });
    offset += Math.ceil(bytes / 8) * 8; // 8-byte aligned, so s64 views line up
  }
  const all = new Uint8Array(offset);
  g.params.forEach((p, i) => {
    all.set(new Uint8Array(p.data.buffer, p.data.byteOffset, p.data.byteLength), metas[i]!.offset);
  });
  writeFileSync(join(dir, "params.bin"), all);
  writeFileSync(join(dir, "graph.json"), JSON.stringify({ params: metas, extra }));
}

function readGraph(dir: string): CapturedGraph & { extra: Record<string, number> } {
  const module = moduleFromProto(new Uint8Array(readFileSync(join(dir, "module.pb"))));
  const index = JSON.parse(readFileSync(join(dir, "graph.json"), "utf8")) as {
    params: ParamMeta[];
    extra: Record<string, number>;
  };
  const all = readFileSync(join(dir, "params.bin"));
  const params = index.params.map((m) => {
    const Ctor = storageCtor(m.type);
    const data = new Ctor(m.bytes / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(data.buffer).set(all.subarray(m.offset, m.offset + m.bytes));
    return new Literal(m.type, m.dims, data);
  });
  return { module, params, extra: index.extra };
}

// -- capturing a model's forward as lazy mode builds it ----------------------------------------

// captureGraph (train_graph.ts): the unoptimized traced graph and its parameters, exactly what
// compileModule would get; the training rows capture their loss graphs the same way.
const capture = captureGraph;

// -- workloads over plain arrays: every process builds the inputs from the same seeds ----------

/** One workload over Float32Array inputs, with a hand-written implementation per runtime. */
interface ArraySpec {
  name: string;
  unit?: "GFLOP/s" | "GB/s";
  work?: number;
  tol: Tolerance;
  inputs: () => Input[];
  reference: (xs: Input[]) => Float32Array;
  /** Kiln's rows and the plain-JS row. */
  kiln: (xs: Input[]) => Candidate[];
  tf: (tf: Tf, ...ts: TfTensor[]) => TfTensor;
  onnx: (xs: Input[]) => OnnxGraph;
  jax: (np: JaxNp, jax: Jax, ...xs: JaxArray[]) => JaxArray;
  /** Inputs for tfjs and jax-js when they differ (the block's mask is an ONNX constant). */
  extraInputs?: (xs: Input[]) => Input[];
}

function arrayWorkload(spec: () => ArraySpec): Workload {
  let s: ArraySpec | undefined;
  const get = () => (s ??= spec());
  return {
    get name() {
      return get().name;
    },
    get unit() {
      return get().unit;
    },
    get work() {
      return get().work;
    },
    get tol() {
      return get().tol;
    },
    prepare: async (dir) => {
      const xs = get().inputs();
      writeF32(join(dir, REF_FILE), get().reference(xs));
      return inputsHash(xs);
    },
    plan: async (group) => {
      const sp = get();
      const xs = sp.inputs();
      const hash = inputsHash(xs);
      const more = sp.extraInputs ? sp.extraInputs(xs) : xs;
      switch (group) {
        case "kiln":
          return { hash, candidates: sp.kiln(xs) };
        case "tfjs-cpu":
        case "tfjs-wasm":
          return { hash, candidates: [tfCandidate(group, more, sp.tf)] };
        case "ort-1":
        case "ort-all":
          return { hash, candidates: [ortCandidate(group, xs, sp.onnx(xs))] };
        case "jax":
          return { hash, candidates: [jaxCandidate(more, sp.jax)] };
        default: {
          const never: never = group;
          throw new Error(`unknown group ${String(never)}`);
        }
      }
    },
  };
}

// -- Kiln's rows: which backend each runs on, and native's thread count --------------------------

/** The native pool sizes a run measures: one thread, and all of them where that is more. */
const NATIVE_THREADS = THREADS > 1 ? [1, THREADS] : [1];

/** Why the native backend cannot run in this process, or undefined when it can. */
function nativeUnavailable(): string | undefined {
  if (backendNames().includes("native")) return undefined;
  if (process.env["KILN_NATIVE"] === "0") return "turned off by KILN_NATIVE=0";
  const st = nativeStatus();
  return st.ok ? "it is not registered" : st.reason;
}

/** The native backend in words for the machine facts: compiler, flags, ISA, default pool. */
function nativeFacts(): string {
  const why = nativeUnavailable();
  const st = nativeStatus();
  if (why !== undefined || !st.ok) return `unavailable: ${why ?? (st.ok ? "" : st.reason)}`;
  const tc = st.toolchain;
  return (
    `${describeCompiler(tc.compiler)} ${tc.cflags.join(" ")}; isa ${st.isa}; ` +
    `${threadsText(st.threads)} by default`
  );
}

/** The backend eager and lazy run on (the default one), which their rows are named for. */
function defaultBackend(): string {
  return getBackend().name;
}

/** One `Kiln compiled` row: its backend and, for native, the pool size it runs with. */
interface CompiledRow {
  runtime: string;
  backend: string;
  threads?: number;
}

/**
 * Native, then wasm, at one thread and at all threads (the issue's targets are ratios against
 * onnxruntime at the same count, and wasm's 2 threads against its 1), then every other backend
 * (`js`: the historical baseline); native's rows are listed where it is unavailable too, so
 * their notes say why.
 */
function compiledRows(interpreter: boolean): CompiledRow[] {
  const rows: CompiledRow[] = NATIVE_THREADS.map((threads) => ({
    runtime: `Kiln compiled (native, ${threadsText(threads)})`,
    backend: "native",
    threads,
  }));
  const names = backendNames();
  if (names.includes("wasm")) {
    for (const threads of NATIVE_THREADS) {
      rows.push({ runtime: `Kiln compiled (wasm, ${threadsText(threads)})`, backend: "wasm",
        threads });
    }
  }
  for (const backend of names) {
    if (backend === "native" || backend === "wasm" ||
      (backend === "interpreter" && !interpreter)) continue;
    rows.push({ runtime: `Kiln compiled (${backend})`, backend });
  }
  return rows;
}

/** Sizes the wasm backend's threads (process-wide); a row that cannot have them is skipped. */
function useWasmThreads(n: number): void {
  setWasmThreads(n);
  const got = wasmThreads();
  if (got !== n) {
    throw new Skip(`wasm runs ${got} thread(s), not ${n}: ${wasmThreadsUnavailable() ?? "?"}`);
  }
}

/** Sizes the native pool (process-wide) and checks the runtime took it. */
function useNativeThreads(n: number): void {
  setNativeThreads(n);
  const got = nativeThreads();
  if (got !== n) throw new Error(`the native pool runs ${got} threads, not the ${n} asked for`);
}

/**
 * A compiled row's candidate; `make` builds the runnable for the backend. On native the pool
 * is sized before anything compiles (the parent already started this process with
 * KILN_NUM_THREADS; setting it again guards against a runtime that ignored it), and where
 * native cannot run the row says why instead of running.
 */
function compiledCandidate(
  row: CompiledRow,
  make: (backend: string) => Prepared | Promise<Prepared>,
): Candidate {
  const c: Candidate = {
    runtime: row.runtime,
    prepare: async () => {
      if (row.backend === "native") {
        const why = nativeUnavailable();
        if (why !== undefined) throw new Skip(`the native backend is not available: ${why}`);
        useNativeThreads(row.threads ?? THREADS);
      }
      if (row.backend === "wasm") useWasmThreads(row.threads ?? THREADS);
      return make(row.backend);
    },
  };
  if (row.threads !== undefined) c.threads = row.threads;
  const why = row.backend === "native" ? nativeUnavailable() : undefined;
  if (why !== undefined) c.skip = `the native backend is not available: ${why}`;
  return c;
}

/**
 * Kiln's ways to run the same tensor function `f`, on Tensors made from the inputs: eager and
 * lazy on the default backend, eager on js too (cheap here, and js is where the historical
 * figures were taken; full runs only), compiled per row of compiledRows.
 */
function kilnCandidates(
  inputs: Input[],
  f: (...xs: Tensor[]) => Tensor,
  opts: { interpreter: boolean },
): Candidate[] {
  const ts = () => inputs.map((x) => tensor(x.data, { shape: x.shape }));
  const def = defaultBackend();
  const eager = (backend: string): Candidate => ({
    runtime: `Kiln eager (${backend})`,
    prepare: async () => {
      if (backend !== def) setEagerBackend(backend);
      const xs = ts();
      return () => f(...xs).data() as Float32Array;
    },
  });
  const out: Candidate[] = [eager(def)];
  // Not in --quick: a process per row, and --quick must stay under 3 minutes on 2 cores.
  if (def !== "js" && !QUICK) out.push(eager("js"));
  out.push({
    runtime: `Kiln lazy (${def})`,
    prepare: async () => {
      const xs = ts();
      return () => lazy(() => f(...xs)).data() as Float32Array;
    },
  });
  for (const row of compiledRows(opts.interpreter)) {
    out.push(
      compiledCandidate(row, (backend) => {
        const xs = ts();
        const cf = compile(f, { backend, cache: "memory", fullgraph: true });
        return () => cf(...xs).data() as Float32Array;
      }),
    );
  }
  return out;
}

function tfCandidate(
  group: "tfjs-cpu" | "tfjs-wasm",
  inputs: Input[],
  f: (tf: Tf, ...xs: TfTensor[]) => TfTensor,
): Candidate {
  const backend = group === "tfjs-cpu" ? "cpu" : "wasm";
  return {
    runtime: groupRuntime(group),
    prepare: async () => {
      const tf = await loadTf(backend);
      const xs = inputs.map((x) => tf.tensor(x.data, x.shape));
      return () => {
        const y = tf.tidy(() => f(tf, ...xs));
        const data = y.dataSync();
        y.dispose();
        return data;
      };
    },
  };
}

async function ortSession(ort: Ort, graph: OnnxGraph, threads: number): Promise<OrtSession> {
  return ort.InferenceSession.create(onnxModel(graph), {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    // Errors only: ORT warns about every unused initializer of a translated graph.
    logSeverityLevel: 3,
  });
}

function ortCandidate(group: "ort-1" | "ort-all", inputs: Input[], graph: OnnxGraph): Candidate {
  return {
    runtime: groupRuntime(group),
    prepare: async () => {
      const ort = await loadOrt();
      const session = await ortSession(ort, graph, ortThreads(group));
      const feeds: Record<string, OrtTensor> = {};
      for (const x of inputs) feeds[x.name] = new ort.Tensor("float32", x.data, x.shape);
      const outName = graph.outputs[0]!.name;
      return async () => (await session.run(feeds))[outName]!.data as Float32Array;
    },
  };
}

function jaxCandidate(
  inputs: Input[],
  f: (np: JaxNp, jax: Jax, ...xs: JaxArray[]) => JaxArray,
): Candidate {
  return {
    runtime: groupRuntime("jax"),
    prepare: async () => {
      const jax = await loadJax();
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

function matmulSpec(n: number): ArraySpec {
  return {
    name: `matmul ${n}x${n}x${n}`,
    unit: "GFLOP/s",
    work: 2 * n ** 3,
    inputs: () => [
      { name: "a", shape: [n, n], data: uniform(n * n, n) },
      { name: "b", shape: [n, n], data: uniform(n * n, n + 1) },
    ],
    tol: { rtol: 1e-5, atol: 1e-5 },
    reference: ([a, b]) => matmulPlain(a!.data, b!.data, n, true),
    kiln: (xs) => [
      // The interpreter (the oracle, never a performance target) on the smallest size, and
      // not in --quick, which must stay under 3 minutes.
      ...kilnCandidates(xs, (x, y) => matmul(x, y), { interpreter: n <= 256 && !QUICK }),
      plainCandidate(() => matmulPlain(xs[0]!.data, xs[1]!.data, n, false)),
    ],
    tf: (tf, x, y) => tf.matMul(x!, y!),
    onnx: () => ({
      name: "matmul",
      inputs: [
        { name: "a", shape: [n, n] },
        { name: "b", shape: [n, n] },
      ],
      outputs: [{ name: "y", shape: [n, n] }],
      nodes: [{ op: "MatMul", inputs: ["a", "b"], outputs: ["y"] }],
    }),
    jax: (np, _jax, x, y) => np.matmul(x!, y!),
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

function elementwiseSpec(n: number): ArraySpec {
  const c = (name: string, v: number) => ({ name, shape: [], values: new Float32Array([v]) });
  return {
    name: `elementwise gelu(x*a+b)*sigmoid(x), ${(n / 2 ** 20).toFixed(0)}M floats`,
    unit: "GB/s",
    work: 8 * n, // 4 bytes read + 4 bytes written per element
    inputs: () => [{ name: "x", shape: [n], data: uniform(n, 7).map((v) => v * 4) }],
    tol: { rtol: 1e-5, atol: 1e-6 },
    reference: ([x]) => chainPlain(x!.data),
    kiln: (xs) => [
      ...kilnCandidates(xs, (t) => mul(gelu(add(mul(t, EW_A), EW_B)), sigmoid(t)), {
        interpreter: false,
      }),
      plainCandidate(() => chainPlain(xs[0]!.data)),
    ],
    tf: (tf, t0) => {
      const t = t0!;
      const u = tf.add(tf.mul(t, tf.scalar(EW_A)), tf.scalar(EW_B));
      const e = tf.erf(tf.mul(u, tf.scalar(Math.SQRT1_2)));
      const g = tf.mul(tf.mul(u, tf.scalar(0.5)), tf.add(e, tf.scalar(1)));
      return tf.mul(g, tf.sigmoid(t));
    },
    onnx: () => ({
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
    jax: (np, jax, t) =>
      np.multiply(
        jax.nn.gelu(np.add(np.multiply(t!.ref, EW_A), EW_B), { approximate: false }),
        jax.nn.sigmoid(t!),
      ),
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

function mlpSpec(batch: number, dims: number[]): ArraySpec {
  const makeInputs = (): Input[] => {
    const x = uniform(batch * dims[0]!, 1);
    const inputs: Input[] = [{ name: "x", shape: [batch, dims[0]!], data: x }];
    for (let l = 0; l + 1 < dims.length; l++) {
      const [k, n] = [dims[l]!, dims[l + 1]!];
      const scale = 1 / Math.sqrt(k);
      const w = uniform(k * n, 10 + l).map((v) => v * scale);
      inputs.push({ name: `w${l}`, shape: [k, n], data: w });
      inputs.push({ name: `b${l}`, shape: [n], data: uniform(n, 20 + l).map((v) => v * 0.1) });
    }
    return inputs;
  };
  const layers = dims.length - 1;
  const plain = (inputs: Input[], f64: boolean) => () => {
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
    inputs: makeInputs,
    tol: { rtol: 1e-5, atol: 1e-5 },
    reference: (xs) => plain(xs, true)(),
    kiln: (inputs) => [
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
      plainCandidate(plain(inputs, false)),
    ],
    tf: (tf, x, ...wb) => {
      let t = x!;
      for (let l = 0; l < layers; l++) {
        t = tf.add(tf.matMul(t, wb[2 * l]!), wb[2 * l + 1]!);
        if (l + 1 < layers) t = tf.relu(t);
      }
      return t;
    },
    onnx: (inputs) => ({
      name: "mlp",
      inputs: inputs.map((x) => ({ name: x.name, shape: x.shape })),
      outputs: [{ name: "y", shape: [batch, dims[layers]!] }],
      nodes,
    }),
    jax: (np, _jax, x, ...wb) => {
      let t = x!;
      for (let l = 0; l < layers; l++) {
        t = np.add(np.matmul(t, wb[2 * l]!), wb[2 * l + 1]!);
        if (l + 1 < layers) t = np.maximum(t, 0);
      }
      return t;
    },
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

function blockSpec(seq: number): ArraySpec {
  const cfg = { ...gpt2Full, residPdrop: 0, attnPdrop: 0, embdPdrop: 0 };
  const [S, D, H] = [seq, cfg.nEmbd, cfg.nHead];
  const [Dh, F, eps] = [D / H, 4 * D, cfg.layerNormEpsilon];
  // GPT2Block's weight shapes (Conv1D stores [in, out]); checked against the block where one is
  // built. Only Kiln's processes build it: its random init is wasted work in a peer's.
  const shapes: Record<(typeof BLOCK_KEYS)[number], number[]> = {
    "ln_1.weight": [D],
    "ln_1.bias": [D],
    "attn.c_attn.weight": [D, 3 * D],
    "attn.c_attn.bias": [3 * D],
    "attn.c_proj.weight": [D, D],
    "attn.c_proj.bias": [D],
    "ln_2.weight": [D],
    "ln_2.bias": [D],
    "mlp.c_fc.weight": [D, F],
    "mlp.c_fc.bias": [F],
    "mlp.c_proj.weight": [F, D],
    "mlp.c_proj.bias": [D],
  };
  const inputs: Input[] = [{ name: "x", shape: [S, D], data: uniform(S * D, 5) }];
  BLOCK_KEYS.forEach((key, i) => {
    const shape = shapes[key];
    const data = uniform(shape.reduce((a, b) => a * b, 1), 100 + i);
    // LayerNorm gains near 1, everything else small: activations stay O(1), as in a real model.
    const gain = key.startsWith("ln_") && key.endsWith("weight");
    const scaled = gain
      ? data.map((v) => 1 + 0.1 * v)
      : data.map((v) => v * (key.endsWith("bias") ? 0.02 : 0.05));
    inputs.push({ name: key.replaceAll(".", "_"), shape, data: scaled });
  });
  /** The block as a function of x, with the inputs' weights loaded. */
  const kilnBlockFn = (): ((x: Tensor) => Tensor) => {
    const block = new GPT2Block(cfg);
    block.eval();
    const state = block.stateDict();
    const weights: Record<string, Tensor> = {};
    BLOCK_KEYS.forEach((key, i) => {
      const want = state[key]!.shape.join(",");
      if (want !== shapes[key].join(",")) {
        throw new Error(`bench: GPT2Block's ${key} is [${want}], not [${shapes[key]}]`);
      }
      weights[key] = tensor(inputs[i + 1]!.data, { shape: inputs[i + 1]!.shape });
    });
    block.loadStateDict(weights);
    return (x: Tensor) => block.call(x.reshape(1, S, D), null)[0];
  };
  const mask = new Float32Array(S * S);
  for (let i = 0; i < S; i++) for (let j = i + 1; j < S; j++) mask[i * S + j] = -1e9;
  const scale = 1 / Math.sqrt(Dh);
  const gc = Math.sqrt(2 / Math.PI);
  const flops = 2 * S * D * (3 * D + D + 2 * F) + 4 * S * S * D;
  const maskInput = { name: "mask", shape: [S, S], data: mask };

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
    inputs: () => inputs,
    tol: { rtol: 1e-4, atol: 1e-5 },
    // The reference evaluator (Kiln's oracle) through the interpreter backend: one slow run.
    reference: (xs) => {
      const ts = xs.map((x) => tensor(x.data, { shape: x.shape }));
      const cf = compile(kilnBlockFn(), { backend: "interpreter", cache: "off" });
      return cf(ts[0]!).data() as Float32Array;
    },
    extraInputs: (xs) => [...xs, maskInput],
    kiln: (xs) => kilnCandidates(xs, kilnBlockFn(), { interpreter: false }),
    tf: (tf, x0, ...w) => {
      const x = x0!;
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
    },
    onnx: (inputs) => ({
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
    jax: (np, jax, x0, ...w) => {
      const x = x0!;
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
    },
  };
}


// -- whole models from models/: Kiln runs the model, the peers run the module Kiln captures ----

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
  ? { warmup: 0, budgetMs: 200, minRuns: 3, maxRuns: 20 }
  : { warmup: 0, budgetMs: 2000, minRuns: 3, maxRuns: 10 };
const MODEL_TOL: Tolerance = { rtol: 1e-3, atol: 1e-4 };
/** The seed of the default generator before a model is built: same weights in every process. */
const MODEL_SEED = 0;

function toF32(t: Tensor): Float32Array {
  const d = t.data();
  if (d instanceof Float32Array) return d;
  const out = new Float32Array(d.length);
  for (let i = 0; i < d.length; i++) out[i] = Number(d[i]);
  return out;
}

/** A zoo model in eval mode (no dropout), built from MODEL_SEED, its random init timed. */
function seededModel<M extends { eval(): unknown }>(what: string, make: () => M): M {
  const t0 = performance.now();
  manualSeed(MODEL_SEED);
  const m = make();
  m.eval();
  process.stderr.write(`  ${what}: random init ${(performance.now() - t0).toFixed(0)} ms\n`);
  return m;
}

/**
 * Kiln eager and lazy (the default backend) and compiled (per row of compiledRows) on a
 * model's forward `f` over fixed arguments. Lazy runs the whole forward as one graph (no
 * depth cut), as compile() does.
 */
function kilnModelCandidates(args: Tensor[], f: (...xs: Tensor[]) => Tensor): Candidate[] {
  const def = defaultBackend();
  return [
    { runtime: `Kiln eager (${def})`, prepare: async () => () => toF32(f(...args)) },
    {
      runtime: `Kiln lazy (${def})`,
      prepare: async () => () =>
        toF32(lazy(() => f(...args), { maxDepth: 1e9, cutRepeats: false })),
    },
    ...compiledRows(false).map((row) =>
      compiledCandidate(row, (backend) => {
        const cf = compile(f, { backend, cache: "memory", fullgraph: true });
        return () => toF32(cf(...args));
      }),
    ),
  ];
}

/** A captured graph with whatever else the peers need to know about it (e.g. the ids slot). */
type GraphWithFacts = CapturedGraph & { extra: Record<string, number> };

/** A model as the parent and the Kiln child build it (seeded, so both build the same). */
interface GraphSetup {
  capture: () => GraphWithFacts;
  reference: () => Float32Array;
  kiln: () => Candidate[];
}

/**
 * The translated forward with its inputs uploaded once (as ORT's feeds, tfjs's tensors or
 * jax-js's arrays are built once for the other workloads): `run` computes the outputs (a tuple:
 * several), `set` replaces one input (generation's ids).
 */
interface PeerRunner {
  run(): Promise<Float32Array[]>;
  set(i: number, data: LiteralData): void;
}
type PeerForward = (inputs: LiteralData[]) => PeerRunner;

interface GraphSpec {
  name: string;
  baseline?: string;
  timing: TimingOptions;
  tol: Tolerance;
  noteFor?: (medianMs: number) => string;
  setup: () => GraphSetup;
  /** How a peer runs the translated forward; default: one run, output 0. */
  peerRun?: (forward: PeerForward, g: GraphWithFacts) => Promise<Prepared>;
  /** peerRun warms up (compiles) before returning. */
  peerWarm?: boolean;
  peerNote?: string;
}

function graphWorkload(make: () => GraphSpec): Workload {
  const s = make();
  const w: Workload = {
    name: s.name,
    tol: s.tol,
    timing: s.timing,
    prepare: async (dir) => {
      const setup = s.setup();
      const t0 = performance.now();
      const g = setup.capture();
      process.stderr.write(
        `  ${s.name}: captured ${g.module.computations[0]?.instructions.length ?? 0} ` +
          `entry instructions in ${(performance.now() - t0).toFixed(0)} ms\n`,
      );
      writeGraph(dir, g, g.extra);
      // The reference on js, the exact tier (bit-identical to the evaluator): a tolerance-tier
      // default backend would make the figure every row is checked against an approximation.
      // The model itself was built on the default backend, as the Kiln children build theirs,
      // so the weights (the inputs hash) are the same bits everywhere.
      setEagerBackend("js");
      try {
        writeF32(join(dir, REF_FILE), setup.reference());
      } finally {
        setEagerBackend(undefined);
      }
      return literalsHash(g.params);
    },
    plan: async (group, dir) => {
      if (group === "kiln") {
        const setup = s.setup();
        // Built from the seed here too: the hash of what this process captured shows that
        // its model has the very weights the peers are fed.
        const hash = literalsHash(setup.capture().params);
        return { hash, candidates: setup.kiln() };
      }
      const g = readGraph(dir);
      const candidate: Candidate = {
        runtime: groupRuntime(group),
        prepare: async () => {
          const forward = await peerForward(group, g.module, g.params.map((p) => p.type));
          if (s.peerRun) return s.peerRun(forward, g);
          const runner = forward(g.params.map((p) => p.data));
          return async () => (await runner.run())[0]!;
        },
      };
      if (s.peerWarm) candidate.warm = true;
      if (s.peerNote !== undefined) candidate.note = s.peerNote;
      return { hash: literalsHash(g.params), candidates: [candidate] };
    },
  };
  if (s.baseline !== undefined) w.baseline = s.baseline;
  if (s.noteFor !== undefined) w.noteFor = s.noteFor;
  return w;
}

// -- the translators (bench/peers/hlo_*.ts), loaded only by the peer children ------------------

/** A named export of one of bench/peers' translator files, or NotTranslatable saying why not. */
async function translatorExport(file: string, name: string): Promise<(...a: never[]) => unknown> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(new URL(`./${file}`, import.meta.url).href)) as Record<string, unknown>;
  } catch (e) {
    throw new NotTranslatable(`bench/peers/${file} could not be loaded: ${message(e)}`);
  }
  const fn = mod[name];
  if (typeof fn !== "function") {
    throw new NotTranslatable(`bench/peers/${file} has no function ${name}`);
  }
  return fn as (...a: never[]) => unknown;
}

/** Runs `translate`; an error there means the peer cannot express this module. */
function translate<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw new NotTranslatable(`${what}: ${message(e)}`);
  }
}

const ORT_TYPE: Record<ElementType, OrtType | undefined> = {
  f32: "float32",
  s32: "int32",
  s64: "int64",
  u8: "uint8",
  pred: "bool",
  f16: undefined,
  bf16: undefined,
};

function asF32(data: unknown): Float32Array {
  if (data instanceof Float32Array) return data;
  if (ArrayBuffer.isView(data) && "length" in data) {
    const src = data as unknown as ArrayLike<number | bigint>;
    return Float32Array.from({ length: src.length }, (_, i) => Number(src[i]!));
  }
  throw new Error("bench: a peer returned something that is not a typed array");
}

/**
 * What hlo_tfjs.ts and hlo_jax.ts return: a function of the inputs that uploads them per call,
 * and `prepare`, which uploads them once (what the bench times: the other runtimes' inputs are
 * not copied per run either).
 */
interface Translated {
  (inputs: LiteralData[]): Float32Array[];
  prepare?: (inputs: LiteralData[]) => {
    run(): Float32Array[];
    set(i: number, data: LiteralData): void;
  };
}

function translatedRunner(f: Translated): PeerForward {
  return (xs) => {
    if (f.prepare !== undefined) {
      const p = f.prepare(xs);
      return { run: async () => p.run(), set: (i, x) => p.set(i, x) };
    }
    const inputs = [...xs];
    return {
      run: async () => f(inputs),
      set: (i, x) => {
        inputs[i] = x;
      },
    };
  };
}

/**
 * The module translated for a peer group, as a function of its parameters' values (`types`:
 * their element types, in order).
 */
async function peerForward(
  group: Group,
  module: Module,
  types: readonly ElementType[],
): Promise<PeerForward> {
  switch (group) {
    case "tfjs-cpu":
    case "tfjs-wasm": {
      const tf = await loadTf(group === "tfjs-cpu" ? "cpu" : "wasm");
      const to = (await translatorExport("hlo_tfjs.ts", "hloToTfjs")) as unknown as (
        tf: Tf,
        m: Module,
      ) => Translated;
      return translatedRunner(translate("hloToTfjs", () => to(tf, module)));
    }
    case "ort-1":
    case "ort-all": {
      const ort = await loadOrt();
      const to = (await translatorExport("hlo_onnx.ts", "hloToOnnx")) as unknown as (
        m: Module,
      ) => OnnxGraph;
      const graph = translate("hloToOnnx", () => to(module));
      const session = await ortSession(ort, graph, ortThreads(group));
      const ortTypes = types.map((t) => {
        const o = ORT_TYPE[t];
        if (o === undefined) throw new NotTranslatable(`onnxruntime input of type ${t}`);
        return o;
      });
      const feed = (i: number, x: LiteralData): [string, OrtTensor] => {
        const input = graph.inputs[i];
        if (input === undefined) throw new Error(`bench: the ONNX graph has no input ${i}`);
        return [input.name, new ort.Tensor(ortTypes[i]!, x, input.shape)];
      };
      return (xs) => {
        const feeds: Record<string, OrtTensor> = Object.fromEntries(xs.map((x, i) => feed(i, x)));
        return {
          run: async () => {
            const out = await session.run(feeds);
            return graph.outputs.map((o) => asF32(out[o.name]!.data));
          },
          set: (i, x) => {
            const [name, t] = feed(i, x);
            feeds[name] = t;
          },
        };
      };
    }
    case "jax": {
      const jax = await loadJax();
      const to = (await translatorExport("hlo_jax.ts", "hloToJax")) as unknown as (
        jax: Jax,
        m: Module,
      ) => Translated;
      return translatedRunner(translate("hloToJax", () => to(jax, module)));
    }
    case "kiln":
      throw new Error("bench: the Kiln group runs the model itself, not a translation");
    default: {
      const never: never = group;
      throw new Error(`unknown group ${String(never)}`);
    }
  }
}

// -- GPT-2, BERT, ResNet forwards --------------------------------------------------------------

function forwardSetup(
  args: Tensor[],
  f: (...xs: Tensor[]) => Tensor,
): GraphSetup {
  return {
    capture: () => ({ ...capture(() => f(...args)), extra: {} }),
    reference: () => toF32(f(...args)),
    kiln: () => kilnModelCandidates(args, f),
  };
}

const GPT2_SEQ = 128;
function gpt2Spec(): GraphSpec {
  return {
    name: `GPT-2 (${ZOO}) forward, logits, seq ${GPT2_SEQ}, batch 1`,
    timing: MODEL_TIMING,
    tol: MODEL_TOL,
    setup: () => {
      const model = seededModel(`GPT-2 (${ZOO})`, () => gpt2.default(GPT2_CONFIG));
      const [ids] = gpt2.inputs({ batch: 1, seq: GPT2_SEQ }, GPT2_CONFIG);
      return forwardSetup([ids], (x) => model.call(x!).logits);
    },
  };
}

const BERT_SEQ = 128;
function bertSpec(): GraphSpec {
  return {
    name: `BERT-style encoder (${ZOO}), last hidden state, seq ${BERT_SEQ}, batch 1`,
    timing: MODEL_TIMING,
    tol: MODEL_TOL,
    setup: () => {
      const model = seededModel(`BERT (${ZOO})`, () => bert.default(BERT_CONFIG));
      const [ids, { attentionMask }] = bert.inputs({ batch: 1, seq: BERT_SEQ }, BERT_CONFIG);
      return forwardSetup(
        [ids, attentionMask!],
        (x, m) => model.call(x!, { attentionMask: m! }).lastHiddenState,
      );
    },
  };
}

const RESNET_INPUT = { batch: 8, size: 64 };
const RESNET_SIZE = QUICK ? "tiny" : "full";
function resnetSpec(): GraphSpec {
  return {
    name: `ResNet-18-style CNN (${RESNET_SIZE}), logits, 8x3x64x64`,
    timing: MODEL_TIMING,
    tol: MODEL_TOL,
    setup: () => {
      const model = seededModel(`ResNet (${RESNET_SIZE})`, () => resnet.default(RESNET_CONFIG));
      return forwardSetup(resnet.inputs(RESNET_INPUT, RESNET_CONFIG), (x) => model.call(x!));
    },
  };
}

// -- generation: 32 greedy tokens ---------------------------------------------------------------

const GEN_TOKENS = 32;
const GEN_PROMPT = 8;
/** The fixed window the peers' generation runs on: the prompt and every token but the last. */
const GEN_WINDOW = GEN_PROMPT + GEN_TOKENS - 1;
const GEN_WINDOW_ROW = `${BASELINE}, ${GEN_WINDOW}-token window`;
const GEN_WINDOW_NOTE = `${GEN_WINDOW}-token window, no KV cache`;
/** A window row whose generation would take longer than this is skipped (its step is noted). */
const GEN_ROW_CAP_MS = (QUICK ? 20 : 240) * 1000;

/** Index of the largest of row `row` of [rows, n] logits (the first on a tie, as argmax). */
function argmaxRow(logits: ArrayLike<number>, row: number, n: number): number {
  let best = 0;
  let bestV = -Infinity;
  for (let j = 0; j < n; j++) {
    const v = logits[row * n + j]!;
    if (v > bestV || (Number.isNaN(v) && !Number.isNaN(bestV))) {
      best = j;
      bestV = v;
    }
  }
  return best;
}

/**
 * Greedy generation with one fixed-size step: the forward runs on a GEN_WINDOW-token window
 * (the tokens so far, then zeros); with causal attention the logits at the last real position
 * do not depend on the padding, so this gives growing-sequence generation's tokens with one
 * shape (one program, one ONNX session, one jit) — the whole window recomputed per token.
 */
function windowGenerator(
  step: (ids: BigInt64Array) => Promise<ArrayLike<number>>,
  prompt: BigInt64Array,
  vocab: number,
): () => Promise<Float32Array> {
  return async () => {
    const ids = new BigInt64Array(GEN_WINDOW);
    ids.set(prompt);
    const out = new Float32Array(GEN_PROMPT + GEN_TOKENS);
    prompt.forEach((v, i) => (out[i] = Number(v)));
    for (let t = 0; t < GEN_TOKENS; t++) {
      const len = GEN_PROMPT + t;
      const next = argmaxRow(await step(ids), len - 1, vocab);
      out[len] = next;
      if (len < GEN_WINDOW) ids[len] = BigInt(next);
    }
    return out;
  };
}

/** Warms `step` up (compiles) and skips the row when a whole generation would pass the cap. */
async function windowPrepared(
  step: (ids: BigInt64Array) => Promise<ArrayLike<number>>,
  prompt: BigInt64Array,
  vocab: number,
): Promise<Prepared> {
  const ids = new BigInt64Array(GEN_WINDOW);
  ids.set(prompt);
  let t0 = performance.now();
  await step(ids);
  let ms = performance.now() - t0;
  // The first call compiled (a native row runs the C compiler there), so only a first call
  // longer than the whole cap settles it; otherwise a second call is the step's cost.
  if (ms <= GEN_ROW_CAP_MS) {
    t0 = performance.now();
    await step(ids);
    ms = performance.now() - t0;
  }
  if (ms * GEN_TOKENS > GEN_ROW_CAP_MS) {
    throw new Skip(
      `one ${GEN_WINDOW}-token step takes ${ms.toFixed(0)} ms, so ${GEN_TOKENS} tokens ` +
        `≈ ${((ms * GEN_TOKENS) / 1000).toFixed(0)} s, over the ` +
        `${GEN_ROW_CAP_MS / 1000} s cap of a row`,
    );
  }
  return windowGenerator(step, prompt, vocab);
}

function promptIds(prompt: Tensor): BigInt64Array {
  const d = prompt.data();
  return BigInt64Array.from({ length: d.length }, (_, i) => BigInt(d[i]!));
}

/**
 * Greedy generation of 32 tokens after an 8-token prompt; the output is the ids (prompt and
 * new tokens), which every row must reproduce exactly. Kiln eager and lazy use the growing KV
 * cache; Kiln compiled uses the static cache (one program serves every step after the prompt);
 * the peers and the Kiln row they are compared with run one fixed-size step (windowGenerator),
 * because the module the peers translate is a forward without a cache.
 */
function generateSpec(): GraphSpec {
  const vocab = GPT2_CONFIG.vocabSize;
  return {
    name:
      `GPT-2 (${ZOO}) greedy generation, ${GEN_TOKENS} tokens after ${GEN_PROMPT}, batch 1 ` +
      `(ratios against the ${GEN_WINDOW}-token window row)`,
    baseline: GEN_WINDOW_ROW,
    timing: MODEL_TIMING,
    tol: { rtol: 0, atol: 0 },
    noteFor: (ms) => `${(ms / GEN_TOKENS).toFixed(2)} ms/token`,
    peerWarm: true,
    peerNote: GEN_WINDOW_NOTE,
    peerRun: async (forward, g) => {
      const at = g.extra["idsParam"];
      if (at === undefined) throw new Error("bench: the generation graph names no ids input");
      const prompt = (g.params[at]!.data as BigInt64Array).slice(0, GEN_PROMPT);
      const runner = forward(g.params.map((p) => p.data));
      return windowPrepared(
        async (ids) => {
          runner.set(at, ids);
          return (await runner.run())[0]!;
        },
        prompt,
        vocab,
      );
    },
    setup: () => {
      const model = seededModel(`GPT-2 (${ZOO})`, () => gpt2.default(GPT2_CONFIG));
      const [prompt] = gpt2.inputs({ batch: 1, seq: GEN_PROMPT }, GPT2_CONFIG);
      const promptData = promptIds(prompt);
      const windowOf = (fill: bigint) => {
        const ids = new BigInt64Array(GEN_WINDOW).fill(fill);
        ids.set(promptData);
        return tensor(ids, { shape: [1, GEN_WINDOW] });
      };
      const logits = (x: Tensor) => model.call(x).logits;
      const gen = (n: number) => model.generate(prompt, { maxNewTokens: n });
      return {
        // Captured twice with different padding: the one parameter that differs is the ids.
        capture: () => {
          const a = capture(() => logits(windowOf(0n)));
          const b = capture(() => logits(windowOf(1n)));
          const differ = a.params.flatMap((p, i) => {
            const q = b.params[i];
            const same =
              q !== undefined &&
              Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength).equals(
                Buffer.from(q.data.buffer, q.data.byteOffset, q.data.byteLength),
              );
            return same ? [] : [i];
          });
          if (differ.length !== 1 || a.params.length !== b.params.length) {
            throw new Error(`bench: cannot tell the ids input (${differ.length} inputs differ)`);
          }
          return { ...a, extra: { idsParam: differ[0]! } };
        },
        reference: () => toF32(gen(GEN_TOKENS)),
        kiln: () => {
          const def = defaultBackend();
          const rows = compiledRows(false);
          const staticCache = rows.map((row) => ({
            ...compiledCandidate(row, (backend) => {
              const forward = compile(
                (x: Tensor, o: gpt2.GPT2ForwardOptions) => model.call(x, o),
                { backend, cache: "memory" },
              );
              const opts = { staticCache: true, cacheLength: GEN_WINDOW, forward };
              model.generate(prompt, { ...opts, maxNewTokens: 2 }); // compiles both programs
              return () => toF32(model.generate(prompt, { ...opts, maxNewTokens: GEN_TOKENS }));
            }),
            note: "static KV cache",
            warm: true,
          }));
          // The peers' way, on every compiled row (js only in --quick, which must stay under
          // 3 minutes): like with like against onnxruntime.
          const windowRows = QUICK ? rows.filter((r) => r.backend === "js") : rows;
          const window = windowRows.map((row) => ({
            ...compiledCandidate(row, (backend) => {
              const cf = compile(logits, { backend, cache: "memory", fullgraph: true });
              const step = async (ids: BigInt64Array) =>
                toF32(cf(tensor(ids, { shape: [1, GEN_WINDOW] })));
              return windowPrepared(step, promptData, vocab);
            }),
            runtime: `${row.runtime}, ${GEN_WINDOW}-token window`,
            note: GEN_WINDOW_NOTE,
            warm: true,
          }));
          const candidates: Candidate[] = [
            {
              runtime: `Kiln eager (${def})`,
              warm: true,
              prepare: async () => {
                gen(2);
                return () => toF32(gen(GEN_TOKENS));
              },
            },
            {
              runtime: `Kiln lazy (${def})`,
              // The growing KV cache, as eager: lazy mode cuts the pending graph at each step
              // (one program per step) and runs every size of the cache's length in a bucket
              // on one padded program (docs/runtime.md, lazy mode). The warm-up is a whole
              // generation, so every bucket's program is compiled before the timed runs.
              note: "growing KV cache, one program per step and bucket",
              warm: true,
              prepare: async () => {
                toF32(lazy(() => gen(GEN_TOKENS)));
                return () => toF32(lazy(() => gen(GEN_TOKENS)));
              },
            },
            ...staticCache,
            ...window,
          ];
          return candidates;
        },
      };
    },
  };
}

// -- compile time per model: cold, and warm from the disk cache in a fresh process -------------

const COMPILE_SCRIPT = join(here, "..", "compile.ts");
/** Timed compiles per figure in this process (the median). */
const COMPILE_REPS = 3;
/**
 * Timed compiles per new-process figure: each is a Node start-up, and each cold native one a C
 * compiler run, so --quick (which must stay under 3 minutes on 2 cores) takes one.
 */
const CHILD_COMPILE_REPS = QUICK ? 1 : 3;

/**
 * bench/compile.ts's child mode: compileModule on `keyFile`'s module through `dir`'s program
 * cache on `backend`, with `cacheDir` as its KILN_CACHE_DIR (where native's library cache
 * lives) when given.
 */
function childCompile(
  keyFile: string,
  dir: string,
  backend: string,
  cacheDir?: string,
): { hit: string; ms: number } {
  const env = childEnv();
  if (cacheDir !== undefined) env["KILN_CACHE_DIR"] = cacheDir;
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", COMPILE_SCRIPT, "--child", keyFile, dir, backend],
    { encoding: "utf8", env },
  );
  if (r.status !== 0) {
    const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
    const why = lines.find((l) => /error/i.test(l)) ?? lines[0] ?? "";
    throw new Error(`compile child failed (${r.status ?? r.signal}): ${why.trim()}`);
  }
  return JSON.parse(r.stdout.trim().split("\n").pop()!) as { hit: string; ms: number };
}

const COLD = "cold (this process)";
const COLD_CHILD = "cold (new process)";
const WARM_CHILD = "warm from the disk cache (new process)";

function instructionCount(module: Module): number {
  return module.computations.reduce((n, c) => n + c.instructions.length, 0);
}

/**
 * Compile time of one model's forward graph on the js backend: cold in this process (a fresh
 * ProgramCache on a fresh temp directory: passes, codegen, store), cold in a new process, and
 * warm in a new process on the populated directory (fingerprint, read, load). Each timing is
 * the median of COMPILE_REPS runs (CHILD_COMPILE_REPS in new processes), each on its own
 * directory (cold) or the same one (warm). A cold run includes storing the entry; the
 * new-process figures exclude Node and tsx start-up.
 */
function jsCompileTime(name: string, module: Module): WorkloadResult {
  const result: WorkloadResult = {
    name: `compile time (js), ms of compileModule: ${name} (${instructionCount(module)} ` +
      `instructions)`,
    baseline: COLD,
    rows: [],
  };
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-peers-compile-"));
  try {
    const keyFile = join(dir, "key.pb");
    writeFileSync(keyFile, moduleToProto(module));
    const cold: number[] = [];
    for (let i = 0; i < COMPILE_REPS; i++) {
      const cache = new ProgramCache({ disk: join(dir, `cold${i}`) });
      const t0 = performance.now();
      const r = compileModule(module, { backend: "js", cache });
      cold.push(performance.now() - t0);
      if (r.hit !== "miss") throw new Error(`bench: cold compile was a ${r.hit}`);
    }
    const children = (hit: string, dirOf: (i: number) => string) =>
      Array.from({ length: CHILD_COMPILE_REPS }, (_, i) => {
        const c = childCompile(keyFile, dirOf(i), "js");
        if (c.hit !== hit) throw new Error(`bench: child compile was a ${c.hit}, not ${hit}`);
        return c.ms;
      });
    const coldChild = children("miss", (i) => join(dir, `child${i}`));
    const warmChild = children("disk", () => join(dir, "cold0"));
    for (const [runtime, times] of [
      [COLD, cold],
      [COLD_CHILD, coldChild],
      [WARM_CHILD, warmChild],
    ] as const) {
      result.rows.push({ runtime, timing: summarize(times) });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

/** Entries in a native library cache directory: one per translation unit compiled there. */
function libEntries(dir: string): number {
  try {
    return readdirSync(dir).filter((n) => n.endsWith(".klib")).length;
  } catch {
    return 0;
  }
}

/**
 * Copies what a native library cache directory holds into `dest`: taken right after the
 * runtime addon was built, that is the addon and the store's secret, no kernel.
 */
function copyLibDir(from: string, dest: string): void {
  mkdirSync(dest, { recursive: true, mode: 0o700 });
  chmodSync(dest, 0o700); // the store trusts only a directory no one else can write
  for (const n of readdirSync(from)) {
    if (n !== "secret" && !n.endsWith(".klib")) continue;
    copyFileSync(join(from, n), join(dest, n));
    chmodSync(join(dest, n), 0o600);
  }
}

/** "3 translation units" for the C compiler's runs (libEntries differences), "3/4" if they vary. */
function unitsText(units: readonly number[]): string {
  const distinct = [...new Set(units)];
  const n = distinct.length === 1 ? distinct[0]! : -1;
  return `C compiler: ${distinct.join("/")} translation unit${n === 1 ? "" : "s"}`;
}

/**
 * Compile time of one model's forward graph on native. Its compile renders C for the model's
 * kernels and runs the C compiler on the ones its library cache (KILN_CACHE_DIR/native) lacks;
 * kernels once loaded stay loaded in the process. So: cold in this process is one run (the
 * first native compile of the graph here, in the fresh KILN_CACHE_DIR the parent gave this
 * process); "kernels loaded" times the later compiles in this process (passes, lowering,
 * program setup); cold in a new process runs on a KILN_CACHE_DIR of its own holding only the
 * runtime addon (`seed`: building the addon is not the model's compile); warm in a new process
 * runs on the first cold child's directories, program cache and library cache. Each note says
 * how many translation units the C compiler built (new library entries).
 */
function nativeCompileTime(name: string, module: Module, seed: string | undefined): WorkloadResult {
  const result: WorkloadResult = {
    name: `compile time (native), ms of compileModule: ${name} (${instructionCount(module)} ` +
      `instructions)`,
    baseline: COLD,
    rows: [],
  };
  const why = nativeUnavailable();
  if (why !== undefined || seed === undefined) {
    const note = `skipped: the native backend is not available: ${why ?? "no runtime addon"}`;
    result.rows.push({ runtime: COLD, note });
    return result;
  }
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-peers-compile-"));
  try {
    const keyFile = join(dir, "key.pb");
    writeFileSync(keyFile, moduleToProto(module));
    const lib = nativeCacheDir();
    const inProcess = (disk: string): [number, number] => {
      const before = libEntries(lib);
      const cache = new ProgramCache({ disk });
      const t0 = performance.now();
      const r = compileModule(module, { backend: "native", cache });
      const ms = performance.now() - t0;
      if (r.hit !== "miss") throw new Error(`bench: a compile on a fresh cache was a ${r.hit}`);
      return [ms, libEntries(lib) - before];
    };
    const [coldMs, coldUnits] = inProcess(join(dir, "cold"));
    const loaded = Array.from({ length: COMPILE_REPS }, (_, i) => {
      const [ms, units] = inProcess(join(dir, `loaded${i}`));
      if (units !== 0) throw new Error(`bench: a compile with its kernels loaded built ${units}`);
      return ms;
    });
    const child = (i: number, hits: readonly string[]): [number, number, string] => {
      const cacheDir = join(dir, `kiln${i}`);
      const before = libEntries(join(cacheDir, "native"));
      const c = childCompile(keyFile, join(dir, `program${i}`), "native", cacheDir);
      if (!hits.includes(c.hit)) throw new Error(`bench: a child compile was a ${c.hit}`);
      return [c.ms, libEntries(join(cacheDir, "native")) - before, c.hit];
    };
    const cold = Array.from({ length: CHILD_COMPILE_REPS }, (_, i) => {
      copyLibDir(seed, join(dir, `kiln${i}`, "native"));
      return child(i, ["miss"]);
    });
    // Native programs may not be in the program cache's disk store yet: then the warm child
    // misses there and its kernels come from the library cache (no C compiler run).
    const warm = Array.from({ length: CHILD_COMPILE_REPS }, () => child(0, ["disk", "miss"]));
    const warmNote = warm.every((w) => w[2] === "disk")
      ? "the program from the disk cache"
      : "program cache miss (native programs are not stored there yet), kernels from the " +
        "library cache";
    result.rows.push(
      {
        runtime: COLD,
        timing: summarize([coldMs]),
        note: `1 run: later compiles here find the kernels loaded; ${unitsText([coldUnits])}`,
      },
      {
        runtime: "kernels loaded (this process)",
        timing: summarize(loaded),
        note: "a new program cache each run: passes, lowering, program setup",
      },
      {
        runtime: COLD_CHILD,
        timing: summarize(cold.map((c) => c[0])),
        note: `runtime addon prebuilt; ${unitsText(cold.map((c) => c[1]))}`,
      },
      {
        runtime: WARM_CHILD,
        timing: summarize(warm.map((c) => c[0])),
        note: `${warmNote}; ${unitsText(warm.map((c) => c[1]))}`,
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

/** A compile-time table, or one row saying why it has none (a failed child, say). */
function compileTable(name: string, make: () => WorkloadResult): WorkloadResult {
  let r: WorkloadResult;
  try {
    r = make();
  } catch (e) {
    r = { name, baseline: COLD, rows: [{ runtime: COLD, note: `error: ${message(e)}` }] };
  }
  process.stderr.write(`  ${r.name} done\n`);
  return r;
}

/**
 * Compile times of the three model forwards on js and on native, each graph captured as the
 * workloads do. The parent starts this process with a fresh, empty KILN_CACHE_DIR; the models
 * are built and captured on js, so nothing native is compiled before the native tables' cold
 * runs, and the library cache holds only the runtime addon when they start (copied once as the
 * seed of the new processes' cold directories).
 */
async function compileTimes(): Promise<WorkloadResult[]> {
  setEagerBackend("js");
  const root = mkdtempSync(join(tmpdir(), "kiln-bench-peers-native-"));
  const out: WorkloadResult[] = [];
  try {
    let seed: string | undefined;
    if (nativeUnavailable() === undefined) {
      getBackend("native"); // builds the runtime addon into this process's library cache
      seed = join(root, "seed");
      copyLibDir(nativeCacheDir(), seed);
    }
    for (const [name, spec] of [
      [`GPT-2 (${ZOO}) forward, seq ${GPT2_SEQ}`, gpt2Spec],
      [`BERT (${ZOO}), seq ${BERT_SEQ}`, bertSpec],
      [`ResNet (${RESNET_SIZE}), 8x3x64x64`, resnetSpec],
    ] as const) {
      const module = spec().setup().capture().module;
      out.push(compileTable(`compile time (js): ${name}`, () => jsCompileTime(name, module)));
      out.push(
        compileTable(`compile time (native): ${name}`, () =>
          nativeCompileTime(name, module, seed),
        ),
      );
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return out;
}

// ---- running: the parent spawns one child per runtime group per workload ---------------------

function entries(): WorkloadEntry[] {
  // --quick must stay under 3 minutes on 2 cores with a process per row (about 90 of them):
  // one matmul size there; the full run has every size.
  const sizes = QUICK ? [256] : [256, 512, 1024];
  const ewN = QUICK ? 1 << 20 : 4 << 20;
  return [
    ...sizes.map((n) => ({
      id: `matmul-${n}`,
      kind: "matmul",
      make: () => arrayWorkload(() => matmulSpec(n)),
    })),
    {
      id: "elementwise",
      kind: "elementwise",
      make: () => arrayWorkload(() => elementwiseSpec(ewN)),
    },
    {
      id: "mlp",
      kind: "mlp",
      make: () => arrayWorkload(() => mlpSpec(64, [784, 1024, 1024, 10])),
    },
    { id: "block", kind: "block", make: () => arrayWorkload(() => blockSpec(128)) },
    { id: "gpt2", kind: "gpt2", make: () => graphWorkload(gpt2Spec) },
    { id: "bert", kind: "bert", make: () => graphWorkload(bertSpec) },
    { id: "resnet", kind: "resnet", make: () => graphWorkload(resnetSpec) },
    { id: "generate", kind: "generate", make: () => graphWorkload(generateSpec) },
  ];
}

/** Cross-checks one candidate against the reference, then times it. */
async function runCandidate(w: Workload, c: Candidate, ref: Float32Array): Promise<Row> {
  const row: Row = { runtime: c.runtime };
  const notes: string[] = c.note === undefined ? [] : [c.note];
  // Each candidate runs in its own process; its program requests are the row's (counted, not
  // timed: an increment per request, inside what is timed anyway).
  resetCacheStats();
  try {
    const run = await c.prepare();
    const t0 = performance.now();
    const got = await run();
    const checkMs = performance.now() - t0;
    const check = crossCheck(got, ref, w.tol);
    row.maxAbsDiff = check.maxAbsDiff;
    if (!check.ok) {
      notes.push(`MISMATCH, not timed: ${check.why}`);
    } else {
      const timing = w.timing ?? TIMING;
      // Only the model workloads (their own timing) have rows this slow; elsewhere a slow
      // cross-check run is the first call's compile on a busy machine, not the work.
      const slow = w.timing !== undefined && checkMs > SLOW_RUN_MS;
      if (slow && c.warm) {
        row.timing = summarize([checkMs]);
        notes.push("timed by its cross-check run (slow)");
      } else if (slow) {
        row.timing = await measure(run, { warmup: 0, budgetMs: 0, minRuns: 1, maxRuns: 1 });
        notes.push("one timed run (slow)");
      } else if (QUICK && w.timing === undefined && checkMs > SLOW_RUN_MS) {
        // --quick only (it must stay under 3 minutes): a slow first call may be a compile,
        // so one more run decides whether the row is slow (tfjs cpu on the block).
        const once = await measure(run, { warmup: 0, budgetMs: 0, minRuns: 1, maxRuns: 1 });
        if (once.medianMs > SLOW_RUN_MS) {
          row.timing = once;
          notes.push("one timed run (slow)");
        } else {
          row.timing = await measure(run, timing);
        }
      } else {
        row.timing = await measure(run, timing);
      }
      if (w.noteFor) notes.unshift(w.noteFor(row.timing.medianMs));
    }
  } catch (e) {
    notes.push(
      e instanceof Skip
        ? `skipped: ${e.message}`
        : e instanceof NotTranslatable
          ? `not translatable: ${e.message}`
          : `error: ${message(e)}`,
    );
  }
  if (notes.length > 0) row.note = notes.join("; ");
  const st = cacheStats();
  if (c.runtime.startsWith("Kiln") && st.requests > 0) {
    row.cache = {
      requests: st.requests,
      compiles: st.compiles,
      compileMs: st.compileMs,
      hits: { ...st.hits },
    };
  }
  return row;
}

/** What a child prints (after RESULT_MARK) as the last line of its stdout. */
interface ChildOutput {
  hash?: string;
  rows?: Row[];
  results?: WorkloadResult[];
  /** How many candidates the group has (a child asked for one of them says). */
  total?: number;
  /** Each candidate's native pool size (null: the default), for its process's environment. */
  threads?: (number | null)[];
  /** The candidates `rows` are for, in order (a first child also reports the skipped ones). */
  indices?: number[];
}

function printResult(out: ChildOutput): Promise<void> {
  // Peers keep thread pools and handles open; exit once the line is out.
  return new Promise(() => {
    process.stdout.write(`${RESULT_MARK}${JSON.stringify(out)}\n`, () => process.exit(0));
  });
}

async function childMain(group: string): Promise<void> {
  if (group === "compile") {
    await printResult({ results: await compileTimes() });
    return;
  }
  if (!(GROUPS as readonly string[]).includes(group)) throw new Error(`unknown group ${group}`);
  const g = group as Group;
  const id = flag("workload");
  const dir = flag("dir");
  const entry = entries().find((e) => e.id === id);
  if (entry === undefined || dir === undefined) {
    throw new Error(`bench child: needs --workload (one of the ids) and --dir, got ${id}`);
  }
  const w = entry.make();
  const ref = readF32(join(dir, REF_FILE));
  let plan: ChildPlan;
  try {
    plan = await w.plan(g, dir);
  } catch (e) {
    const note = e instanceof Skip ? `skipped: ${e.message}` : `error: ${message(e)}`;
    await printResult({ hash: "", rows: [{ runtime: groupRuntime(g), note }] });
    return;
  }
  const rows: Row[] = [];
  // `--candidate i`: only the i-th (the Kiln group runs each of its modes in its own process,
  // so one mode's heap and JIT state never weigh on the next mode's timings); the first also
  // reports every row known not to run.
  const only = flag("candidate");
  const at = only === undefined ? undefined : Number(only);
  const chosen = plan.candidates
    .map((c, i) => ({ c, i }))
    .filter(({ c, i }) => at === undefined || i === at || (at === 0 && c.skip !== undefined));
  for (const { c } of chosen) {
    const row =
      c.skip === undefined
        ? await runCandidate(w, c, ref)
        : { runtime: c.runtime, note: `skipped: ${c.skip}` };
    rows.push(jsonRow(row));
    process.stderr.write(`  ${w.name}: ${c.runtime} done\n`);
  }
  const threads = plan.candidates.map((c) => c.threads ?? null);
  const indices = chosen.map(({ i }) => i);
  await printResult({ hash: plan.hash, rows, total: plan.candidates.length, threads, indices });
}

/**
 * The environment of a child: this one's, with KILN_NUM_THREADS set to `threads` for a row that
 * runs native at that count and removed otherwise (so a default row runs the default pool: all
 * cores, whatever the shell that started the bench had set).
 */
function childEnv(threads?: number): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env["KILN_NUM_THREADS"];
  if (threads !== undefined) env["KILN_NUM_THREADS"] = String(threads);
  return env;
}

/** Runs this script as a child; its result, or why there is none, in words. */
function runChild(
  args: string[],
  env: NodeJS.ProcessEnv = childEnv(),
): Promise<{ out?: ChildOutput; error?: string }> {
  return new Promise((done) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", SELF, ...args, ...(QUICK ? ["--quick"] : [])],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env },
    );
    let stdout = "";
    let errTail = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      process.stderr.write(d);
      errTail = (errTail + d).slice(-4000);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, CHILD_TIMEOUT_MS);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((l) => l.startsWith(RESULT_MARK));
      if (line !== undefined) {
        try {
          done({ out: JSON.parse(line.slice(RESULT_MARK.length)) as ChildOutput });
          return;
        } catch (e) {
          done({ error: `printed a result that is not JSON (${message(e)})` });
          return;
        }
      }
      const last = errTail.trim().split("\n").filter((l) => l.trim() !== "").pop() ?? "";
      done({
        error: timedOut
          ? `was stopped after ${CHILD_TIMEOUT_MS / 1000} s`
          : `exited with ${code ?? signal} and no result${last ? `: ${last.trim()}` : ""}`,
      });
    });
  });
}

/** Builds the reference, runs every group's child, and merges their rows. */
async function runWorkload(e: WorkloadEntry): Promise<[WorkloadResult, string]> {
  const w = e.make();
  const result: WorkloadResult = { name: w.name, baseline: w.baseline ?? BASELINE, rows: [] };
  if (w.unit !== undefined) result.unit = w.unit;
  if (w.work !== undefined) result.work = w.work;
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-peers-"));
  try {
    let hash: string;
    try {
      hash = await w.prepare(dir);
    } catch (err) {
      const note = `error: the reference failed: ${message(err)}`;
      result.rows.push({ runtime: "reference", note });
      return [result, ""];
    }
    const runs: { g: Group; candidate?: number; threads?: number }[] = activeGroups().map(
      (g) => ({ g }),
    );
    // The Kiln group's rows by candidate, put in candidate order once the group is done (its
    // first child also reports the rows known not to run, ahead of their turn).
    const kiln: [number, Row][] = [];
    const flushKiln = () => {
      kiln.sort((a, b) => a[0] - b[0]);
      result.rows.push(...kiln.map(([, row]) => row));
      kiln.length = 0;
    };
    for (let k = 0; k < runs.length; k++) {
      const { g, candidate, threads } = runs[k]!;
      const args = ["--child", g, "--workload", e.id, "--dir", dir];
      // Kiln's modes each get a process too: the first child runs mode 0 and says how many
      // there are and which native pool size each wants; the others follow it, each started
      // with its pool size (the pool is process-wide).
      const split = g === "kiln";
      if (!split) flushKiln();
      const t0 = performance.now();
      const r = await runChild(
        split ? [...args, "--candidate", String(candidate ?? 0)] : args,
        childEnv(threads),
      );
      // Where a run's wall time goes (process start-up and setup included), on stderr.
      const which = split ? `${g} #${candidate ?? 0}` : g;
      const took = ((performance.now() - t0) / 1000).toFixed(1);
      process.stderr.write(`  ${e.id} ${which}: ${took} s\n`);
      if (split && candidate === undefined) {
        const done = new Set(r.out?.indices ?? [0]);
        const more = Array.from({ length: r.out?.total ?? 1 }, (_, i) => i)
          .filter((i) => !done.has(i))
          .map((i) => {
            const t = r.out?.threads?.[i];
            return t === null || t === undefined
              ? { g, candidate: i }
              : { g, candidate: i, threads: t };
          });
        runs.splice(k + 1, 0, ...more);
      }
      const rows = r.out?.rows;
      const add = (list: Row[]) => {
        if (!split) result.rows.push(...list);
        else list.forEach((row, j) => kiln.push([r.out?.indices?.[j] ?? candidate ?? 0, row]));
      };
      if (rows === undefined) {
        add([{ runtime: groupRuntime(g), note: `error: its process ${r.error}` }]);
        continue;
      }
      if (r.out?.hash !== hash && r.out?.hash !== "") {
        for (const row of rows) {
          delete row.timing;
          row.note =
            `not compared: its inputs differ from the parent's (hash ` +
            `${String(r.out?.hash).slice(0, 12)}, expected ${hash.slice(0, 12)})`;
        }
      }
      add(rows);
    }
    flushKiln();
    return [result, hash];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
    availableParallelism: THREADS,
    mhz: Math.round(nominalMHz()),
    simd: simd.join(" "),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    kiln: kiln.version,
    kilnCommit: gitCommit(),
    // What the native rows ran on: compiler, flags, ISA, the default pool.
    nativeBackend: nativeFacts(),
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
  if (CHILD !== undefined) {
    try {
      await childMain(CHILD);
    } catch (e) {
      // One line, last on stderr: the parent quotes it in the row.
      process.stderr.write(`bench child ${CHILD}: ${message(e)}\n`);
      process.exit(1);
    }
    return;
  }
  const started = performance.now();
  const { versions, missing } = peerVersions();
  const results: WorkloadResult[] = [];
  const hashes: Record<string, string> = {};
  for (const e of entries()) {
    if (ONLY && !ONLY.includes(e.kind)) continue;
    const t0 = performance.now();
    const [r, hash] = await runWorkload(e);
    results.push(r);
    hashes[r.name] = hash;
    console.log(`\n${textTable(r)}`);
    process.stderr.write(`${e.id}: ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  }
  if (!ONLY || ONLY.includes("compile")) {
    // A fresh, empty KILN_CACHE_DIR: native's cold compiles in that process must compile.
    const cacheDir = mkdtempSync(join(tmpdir(), "kiln-bench-peers-cache-"));
    const env = { ...childEnv(), KILN_CACHE_DIR: cacheDir };
    const r = await runChild(["--child", "compile"], env).finally(() =>
      rmSync(cacheDir, { recursive: true, force: true }),
    );
    const compiled = r.out?.results ?? [
      {
        name: "compile time",
        baseline: COLD,
        rows: [{ runtime: COLD, note: `error: its process ${r.error}` }],
      },
    ];
    for (const c of compiled) {
      results.push(c);
      console.log(`\n${textTable(c)}`);
    }
  }
  const m = machine();
  const ceil = await ceiling(QUICK);
  console.log(`\nthis CPU's ceiling: ${JSON.stringify(ceil)}`);
  const method =
    "one child process per runtime group per workload (Kiln and plain JS, each Kiln row in " +
    "its own; tfjs cpu; tfjs wasm; onnxruntime-node 1 thread; onnxruntime-node all threads; " +
    "jax-js); native rows sized by KILN_NUM_THREADS; the parent builds the reference once " +
    "and checks every child's inputs hash";
  const report = {
    date: new Date().toISOString(),
    mode: QUICK ? "quick" : "full",
    method,
    machine: m,
    ceiling: ceil,
    versions,
    missingPeers: missing,
    timing: TIMING,
    modelTiming: MODEL_TIMING,
    slowRunMs: SLOW_RUN_MS,
    baseline: BASELINE,
    workloads: results.map((w) => ({
      ...w,
      ...(hashes[w.name] ? { inputsHash: hashes[w.name] } : {}),
      rows: w.rows.map((r) => ({
        ...r,
        rate: rate(w, r),
        ratio: ratio(w, r),
        ratioOrtSameThreads: ortRatio(w, r),
      })),
    })),
    seconds: (performance.now() - started) / 1000,
  };
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, "latest.json"), `${JSON.stringify(report, null, 2)}\n`);
  const md = [
    "# Kiln side-by-side benchmarks — latest run",
    "",
    `Written by \`bench/peers/run.ts\` (${report.mode} mode) on ${report.date}, in ` +
      `${report.seconds.toFixed(0)} s, ${method}. Ratios are median time / median time of ` +
      `the table's baseline (${BASELINE} unless the title says otherwise; above 1: slower); ` +
      "`x onnxruntime (same threads)` divides a Kiln row that states its thread count by " +
      "onnxruntime's row at that count. Spread is (p90 - p10) / median of the timed runs.",
    "",
    "| machine | |",
    "| --- | --- |",
    ...Object.entries(m).map(([k, v]) => `| ${k} | ${v} |`),
    ...Object.entries(versions).map(([k, v]) => `| ${k} | ${v} |`),
    ...Object.entries(missing).map(([k, v]) => `| ${k} | missing: ${v} |`),
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
