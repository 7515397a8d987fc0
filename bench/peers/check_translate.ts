// The check for the HLO → peer translators (hlo_onnx.ts, hlo_tfjs.ts, hlo_jax.ts): for every
// zoo model it captures the forward graph lazy mode hands to the program cache (the module the
// bench translates), computes the reference with Kiln's evaluator on the very inputs lazy mode
// fed it (weights included), runs the translation on each available peer and prints the largest
// difference per model × peer (jax-js twice: also with take as a one-hot contraction, as the
// training bench's jax-js rows lower it). Also a GPT-2 static-cache step (the generation
// workload's graph: dynamic-update-slice, a tuple of logits and caches).
//
//   npx tsx bench/peers/check_translate.ts            tiny configs of every zoo model
//   npx tsx bench/peers/check_translate.ts --full     also GPT-2 small / BERT-base at seq 128,
//                                                     ResNet-18 at 8x3x64x64 (the bench shapes)
//   [--only gpt2,bert] [--peers onnx,tfjs-cpu,tfjs-wasm,jax]
//
// Tolerance: an output passes when max|peer - reference| <= 1e-4 * max|reference|
// (float32 reassociation in long dot products is ~1e-6 relative per op; 1e-4 of the output's
// scale leaves room for a deep model while a wrong op — a transposed weight, a missing mask —
// is off by O(1) of it). Exits 1 when any row fails or is not translatable; a peer that is not
// installed is skipped, not a failure.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { clearLazyGraphs, lazy, type Tensor, tensor } from "../../index.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { bert, gpt2, resnet, zoo } from "../../models/index.ts";
import type { CacheResult } from "../../runtime/cache.ts";
import { ProgramCache } from "../../runtime/index.ts";
import { type InputArray, parameterArrays, toFloat32 } from "./hlo_common.ts";
import { hloToJax, type JaxNamespace } from "./hlo_jax.ts";
import { hloToOnnx } from "./hlo_onnx.ts";
import { hloToTfjs, type TfNamespace } from "./hlo_tfjs.ts";
import { onnxModel, type OnnxType } from "./onnx.ts";

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const FULL = argv.includes("--full");
const ONLY = flag("only")?.split(",");
const PEERS = flag("peers")?.split(",") ?? ["onnx", "tfjs-cpu", "tfjs-wasm", "jax"];
const RTOL = 1e-4;

// ---- capture: the module and the inputs lazy mode runs it on, and the reference ------------

interface Captured {
  module: Module;
  inputs: EvalValue[];
  reference: Float32Array[];
}

class CapturingCache extends ProgramCache {
  last: Captured | undefined;
  override getOrCompile(module: Module): CacheResult {
    // The executable IS the reference: it records the inputs and runs the evaluator.
    const executable = {
      backend: "capture",
      module,
      run: (inputs: readonly EvalValue[]): EvalValue => {
        const out = evaluate(module, inputs);
        const flat: Float32Array[] = [];
        const walk = (v: EvalValue) => {
          if (v instanceof Literal) flat.push(toFloat32(v.data));
          else v.forEach(walk);
        };
        walk(out);
        this.last = { module, inputs: [...inputs], reference: flat };
        return out;
      },
    };
    return { executable, hit: "miss", key: "capture" };
  }
}

/** The whole forward `f` as one lazy graph, run once through the reference evaluator. */
function capture(f: () => Tensor | Tensor[]): Captured {
  clearLazyGraphs();
  const cache = new CapturingCache({ disk: false });
  const out = lazy(f, { backend: "interpreter", cache, maxDepth: 1e9, cutRepeats: false });
  (Array.isArray(out) ? out[0]! : out).data();
  if (!cache.last) throw new Error("check_translate: lazy mode compiled nothing");
  return cache.last;
}

/** The first tensor of a model's output (a Tensor, or an object of them). */
function firstTensor(r: unknown): Tensor {
  if (r !== null && typeof r === "object" && "data" in r) return r as Tensor;
  for (const v of Object.values(r as object)) if (v !== null && typeof v === "object") return v;
  throw new Error("check_translate: the model returned no tensor");
}

interface Case {
  name: string;
  capture: () => Captured;
}

type Callable = { call(...a: unknown[]): unknown; eval(): unknown };

function zooCase(name: keyof typeof zoo): Case {
  return {
    name: `${name} (tiny)`,
    capture: () => {
      const z = zoo[name];
      const m = z.create("tiny") as unknown as Callable;
      m.eval();
      const args = z.inputs(undefined, "tiny");
      return capture(() => firstTensor(m.call(...args)));
    },
  };
}

/** One static-cache generation step after `written` positions: logits and every cache. */
function gpt2StepCase(config: gpt2.GPT2Config, label: string, cacheLength: number): Case {
  return {
    name: `gpt2 static-cache step (${label})`,
    capture: () => {
      const model = gpt2.default(config);
      model.eval();
      const cache = model.createStaticCache(1, cacheLength);
      const [ids] = gpt2.inputs({ batch: 1, seq: 1 }, config);
      return capture(() => {
        const out = model.call(ids, { staticCache: cache, cachePosition: tensor(3n) });
        return [out.logits, ...out.pastKeyValues!.flat()];
      });
    },
  };
}

const cases: Case[] = [
  ...(Object.keys(zoo) as (keyof typeof zoo)[]).map(zooCase),
  gpt2StepCase(gpt2.tinyConfig, "tiny", 8),
];
if (FULL) {
  cases.push(
    {
      name: "gpt2 (full) seq 128",
      capture: () => {
        const m = gpt2.default(gpt2.fullConfig);
        m.eval();
        const [ids] = gpt2.inputs({ batch: 1, seq: 128 }, gpt2.fullConfig);
        return capture(() => m.call(ids).logits);
      },
    },
    {
      name: "bert (full) seq 128",
      capture: () => {
        const m = bert.default(bert.fullConfig);
        m.eval();
        const [ids, o] = bert.inputs({ batch: 1, seq: 128 }, bert.fullConfig);
        return capture(() => m.call(ids, o).lastHiddenState);
      },
    },
    {
      name: "resnet (full) 8x3x64x64",
      capture: () => {
        const m = resnet.default(resnet.fullConfig);
        m.eval();
        const [x] = resnet.inputs({ batch: 8, size: 64 }, resnet.fullConfig);
        return capture(() => m.call(x));
      },
    },
    gpt2StepCase(gpt2.fullConfig, "full", 40),
  );
}

// ---- peers -----------------------------------------------------------------------------------

const peerRequire = createRequire(join(here, "package.json"));
const importPeer = (pkg: string): Promise<unknown> => import(peerRequire.resolve(pkg));

interface OrtTensor {
  data: ArrayLike<number | bigint>;
}
interface Ort {
  Tensor: new (type: OnnxType, data: InputArray, dims: number[]) => OrtTensor;
  InferenceSession: {
    create(
      model: Uint8Array,
      o: Record<string, unknown>,
    ): Promise<{
      run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
      release(): Promise<void>;
    }>;
  };
}
type TfRuntime = TfNamespace & {
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
};

/** A peer: runs a module on inputs, or says why it cannot (missing, not translatable). */
interface Peer {
  name: string;
  missing?: string;
  run?: (m: Module, inputs: InputArray[]) => Promise<Float32Array[]>;
}

function why(e: unknown): string {
  return e instanceof Error ? e.message.split("\n")[0]! : String(e);
}

async function loadPeers(): Promise<Peer[]> {
  const peers: Peer[] = [];
  if (PEERS.includes("onnx")) {
    try {
      const ort = (await importPeer("onnxruntime-node")) as Ort;
      peers.push({
        name: "onnxruntime-node",
        run: async (m, inputs) => {
          const graph = hloToOnnx(m);
          const session = await ort.InferenceSession.create(onnxModel(graph), {
            executionProviders: ["cpu"],
            graphOptimizationLevel: "all",
            // ORT folds constant subgraphs and then warns about each initializer it dropped.
            logSeverityLevel: 3,
          });
          try {
            const feeds: Record<string, OrtTensor> = {};
            graph.inputs.forEach((x, i) => {
              feeds[x.name] = new ort.Tensor(x.type ?? "float32", inputs[i]!, x.shape);
            });
            const out = await session.run(feeds);
            return graph.outputs.map((y) => toFloat32(out[y.name]!.data));
          } finally {
            await session.release();
          }
        },
      });
    } catch (e) {
      peers.push({ name: "onnxruntime-node", missing: why(e) });
    }
  }
  const backends = PEERS.filter((p) => p.startsWith("tfjs-")).map((p) => p.slice(5));
  if (backends.length > 0) {
    let tf: TfRuntime | undefined;
    let missing = "";
    try {
      tf = (await importPeer("@tensorflow/tfjs-core")) as TfRuntime;
      await importPeer("@tensorflow/tfjs-backend-cpu");
      const wasm = (await importPeer("@tensorflow/tfjs-backend-wasm")) as {
        setWasmPaths(prefix: string): void;
      };
      wasm.setWasmPaths(join(dirname(peerRequire.resolve("@tensorflow/tfjs-backend-wasm")), "/"));
    } catch (e) {
      missing = why(e);
    }
    for (const b of backends) {
      if (!tf) {
        peers.push({ name: `tfjs ${b}`, missing });
        continue;
      }
      const t = tf;
      peers.push({
        name: `tfjs ${b}`,
        run: async (m, inputs) => {
          if (!(await t.setBackend(b))) throw new Error(`tfjs backend ${b} did not start`);
          await t.ready();
          const f = hloToTfjs(t, m);
          try {
            return f(inputs);
          } finally {
            f.dispose();
          }
        },
      });
    }
  }
  if (PEERS.includes("jax")) {
    try {
      const jax = (await importPeer("@jax-js/jax")) as JaxNamespace & {
        init(...d: string[]): Promise<string[]>;
        defaultDevice(d: string): string;
      };
      if (!(await jax.init("wasm")).includes("wasm")) throw new Error("no wasm device");
      jax.defaultDevice("wasm");
      // The training bench's jax-js rows lower take as a one-hot contraction (hlo_jax.ts,
      // takeAsOneHot): checked here on the same graphs as the plain lowering.
      for (const takeAsOneHot of [false, true]) {
        peers.push({
          name: takeAsOneHot ? "jax-js jit (wasm, take as one-hot)" : "jax-js jit (wasm)",
          run: async (m, inputs) => {
            const f = hloToJax(jax, m, { takeAsOneHot });
            try {
              return f(inputs);
            } finally {
              f.dispose();
            }
          },
        });
      }
    } catch (e) {
      peers.push({ name: "jax-js jit (wasm)", missing: why(e) });
    }
  }
  return peers;
}

// ---- main ------------------------------------------------------------------------------------

/** max|y - ref| over every output, and the error as a fraction of max|ref|. */
function compare(ys: Float32Array[], refs: Float32Array[]): { diff: number; err: number } {
  if (ys.length !== refs.length) throw new Error(`${ys.length} outputs, expected ${refs.length}`);
  let diff = 0;
  let err = 0;
  ys.forEach((y, k) => {
    const r = refs[k]!;
    if (y.length !== r.length) throw new Error(`output ${k}: ${y.length} values, not ${r.length}`);
    let d = 0;
    let scale = Number.MIN_VALUE;
    for (let i = 0; i < r.length; i++) {
      const a = Math.abs(y[i]! - r[i]!);
      d = Number.isNaN(a) ? Infinity : Math.max(d, a);
      scale = Math.max(scale, Math.abs(r[i]!));
    }
    diff = Math.max(diff, d);
    err = Math.max(err, d === 0 ? 0 : d / scale);
  });
  return { diff, err };
}

async function main(): Promise<void> {
  const peers = await loadPeers();
  const rows: string[][] = [["model", "peer", "max abs diff", "rel. to scale", "ms", "result"]];
  let failed = 0;
  for (const c of cases) {
    if (ONLY && !ONLY.some((o) => c.name.startsWith(o))) continue;
    const t0 = performance.now();
    const cap = c.capture();
    const n = cap.module.entry.instructions.length;
    process.stderr.write(
      `${c.name}: ${n} instructions, reference in ${(performance.now() - t0).toFixed(0)} ms\n`,
    );
    const inputs = parameterArrays(cap.module, cap.inputs);
    for (const p of peers) {
      if (p.missing !== undefined || !p.run) {
        rows.push([c.name, p.name, "", "", "", `skipped: ${p.missing}`]);
        continue;
      }
      const t1 = performance.now();
      try {
        const ys = await p.run(cap.module, inputs);
        const ms = (performance.now() - t1).toFixed(0);
        const { diff, err } = compare(ys, cap.reference);
        const ok = err <= RTOL;
        if (!ok) failed++;
        rows.push([c.name, p.name, diff.toExponential(2), err.toExponential(2), ms,
          ok ? "ok" : "FAIL"]);
      } catch (e) {
        failed++;
        rows.push([c.name, p.name, "", "", "", `ERROR ${why(e)}`]);
      }
    }
  }
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
  for (const r of rows) console.log(r.map((v, j) => v.padEnd(widths[j]!)).join("  ").trimEnd());
  console.log(`\ntolerance: max abs diff <= ${RTOL} x max |reference| per output`);
  if (failed > 0) {
    console.log(`${failed} row(s) failed`);
    process.exit(1);
  }
}

await main();
