// One peer row of the training bench (bench/train.ts), in a child process of its own (as
// bench/peers/run.ts isolates each runtime): it reads the loss graph the parent captured from a
// Kiln model (forward + cross-entropy, HLO) with its weights and batch, translates the forward
// into the peer's ops (hlo_tfjs.ts, hlo_jax.ts — the same lowering the inference bench runs),
// makes the trainable parameters the peer's own, and trains with the peer's autodiff and
// optimizer:
//   tfjs (cpu, wasm): `tf.variableGrads` of the translated loss, then AdamW as Kiln runs it —
//     the decoupled decay p *= 1 - lr·wd by hand (tfjs's Adam has no weight decay), then
//     `tf.train.adam(lr, b1, b2, eps).applyGradients` — op by op, as tfjs runs;
//   jax-js (wasm): one `jax.jit` of the whole step — `valueAndGrad` of the translated loss and
//     AdamW written in jax-js ops (torch's rule, the rule Kiln's AdamW follows).
// Step 1 (trace / compile + the first update) is timed on its own; its loss must agree with
// Kiln's first-step loss (train_graph.ts, lossAgrees) or the row is reported, not timed. Step 2
// is a warm-up whose loss shows the update moved the loss as Kiln's did; then the timed steps.
// Prints one JSON line after TRAIN_RESULT_MARK.
//
//   npx tsx bench/peers/train_peer.ts --runtime tfjs-cpu|tfjs-wasm|jax --dir DIR

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { InputArray, PeerType } from "./hlo_common.ts";
import { jaxLowering, type JaxArray, type JaxNamespace } from "./hlo_jax.ts";
import { type TfNamespace, type TfTensor, tfjsOps, upload as tfUpload } from "./hlo_tfjs.ts";
import { lowerModule } from "./hlo_common.ts";
import {
  lossAgrees,
  type PeerTrainResult,
  readTrainGraph,
  stepsWithin,
  TRAIN_RESULT_MARK,
  type TrainSpec,
} from "./train_graph.ts";

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const RUNTIME = flag("runtime") ?? "";
const DIR = flag("dir") ?? "";
const peerRequire = createRequire(join(here, "package.json"));

const NAMES: Record<string, string> = {
  "tfjs-cpu": "tfjs cpu (variableGrads + AdamW via tf.train.adam)",
  "tfjs-wasm": "tfjs wasm (variableGrads + AdamW via tf.train.adam)",
  jax: "jax-js jit (wasm; valueAndGrad + AdamW, one jit)",
};

function finish(r: PeerTrainResult): void {
  process.stdout.write(`${TRAIN_RESULT_MARK}${JSON.stringify(r)}\n`);
}

async function importPeer(pkg: string): Promise<unknown> {
  return import(pathToFileURL(peerRequire.resolve(pkg)).href);
}

/** A peer's step: runs one training step, returns its loss (read back: the step is done). */
type Step = () => number;

interface TfVar extends TfTensor {
  assign(t: TfTensor): void;
}
interface TfTrain extends TfNamespace {
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
  variable(t: TfTensor, trainable: boolean, name: string): TfVar;
  variableGrads(f: () => TfTensor, vars: TfVar[]): { value: TfTensor; grads: Record<string, TfTensor> };
  scalar(v: number): TfTensor;
  train: {
    adam(lr: number, b1: number, b2: number, eps: number): {
      applyGradients(g: Record<string, TfTensor>): void;
    };
  };
}

/**
 * tfjs-core's node build registers no gradients (the @tensorflow/tfjs bundle imports
 * tfjs-core's register_all_gradients for that); that module ships only as ESM with
 * extensionless imports, which Node cannot load, so it is bundled here with esbuild (tsx's own
 * dependency) and imported from memory. Its registrations land in tfjs's global registry, the
 * one the node build's engine reads.
 */
async function registerTfGradients(): Promise<void> {
  const esbuild = (await import("esbuild")) as {
    build(o: Record<string, unknown>): Promise<{ outputFiles: { text: string }[] }>;
  };
  const entry = join(
    dirname(peerRequire.resolve("@tensorflow/tfjs-core")),
    "register_all_gradients.js",
  );
  const out = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "node",
    write: false,
    logLevel: "silent",
  });
  const code = out.outputFiles[0]!.text;
  await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
}

async function tfjsStep(
  backend: "cpu" | "wasm",
  g: ReturnType<typeof readTrainGraph>,
): Promise<Step> {
  const tf = (await importPeer("@tensorflow/tfjs-core")) as TfTrain;
  await registerTfGradients();
  if (backend === "cpu") {
    await importPeer("@tensorflow/tfjs-backend-cpu");
  } else {
    const wasm = (await importPeer("@tensorflow/tfjs-backend-wasm")) as {
      setWasmPaths(prefix: string): void;
    };
    wasm.setWasmPaths(join(dirname(peerRequire.resolve("@tensorflow/tfjs-backend-wasm")), "/"));
  }
  if (!(await tf.setBackend(backend))) throw new Error(`tfjs backend ${backend} failed to start`);
  await tf.ready();
  const lowered = lowerModule(g.module);
  const { ops } = tfjsOps(tf);
  const spec = g.spec;
  const h = spec.hyper;
  const slot = new Map(spec.trainable.map((e, k) => [e, k]));
  const vars: TfVar[] = [];
  const inputs: TfTensor[] = g.params.map((p, i) => {
    const t = tfUpload(tf, p.data as InputArray, lowered.params[i]!.type, [...p.dims], `input ${i}`);
    const k = slot.get(i);
    if (k === undefined) return t;
    const v = tf.variable(t, true, `p${k}`);
    t.dispose();
    vars.push(v);
    return v;
  });
  const opt = tf.train.adam(h.lr, h.beta1, h.beta2, h.eps);
  const decay = tf.keep(tf.scalar(1 - h.lr * h.weightDecay));
  return () => {
    const value = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() => lowered.run(ops, inputs)[0]!, vars);
      for (const v of vars) v.assign(tf.mul(v, decay));
      opt.applyGradients(grads);
      return value;
    });
    const loss = value.dataSync()[0]!;
    value.dispose();
    return loss;
  };
}

interface JaxTrain extends JaxNamespace {
  init(...devices: string[]): Promise<string[]>;
  defaultDevice(d?: string): string;
  valueAndGrad(
    f: (ps: JaxArray[], others: JaxArray[]) => JaxArray,
  ): (ps: JaxArray[], others: JaxArray[]) => [JaxArray, JaxArray[]];
}

async function jaxStep(g: ReturnType<typeof readTrainGraph>): Promise<Step> {
  const jax = (await importPeer("@jax-js/jax")) as JaxTrain;
  const got = await jax.init("wasm");
  if (!got.includes("wasm")) throw new Error("jax-js: the wasm device did not initialize");
  jax.defaultDevice("wasm");
  const np = jax.numpy;
  const { lowered, trace, upload } = jaxLowering(jax, g.module, { takeAsOneHot: true });
  const spec = g.spec;
  const h = spec.hyper;
  const nP = spec.trainable.length;
  const slot = new Map(spec.trainable.map((e, k) => [e, k]));
  const otherIdx = g.params.map((_, i) => i).filter((i) => !slot.has(i));
  const up = (i: number) => {
    const p = g.params[i]!;
    return upload(p.data as InputArray, lowered.params[i]!.type as PeerType, [...p.dims], `input ${i}`);
  };
  const f32 = (v: number) => np.array(Float32Array.of(v), { shape: [] });
  const zerosLike = (i: number) =>
    np.array(new Float32Array(g.params[i]!.data.length), { shape: [...g.params[i]!.dims] });
  let params = spec.trainable.map(up);
  let m = spec.trainable.map(zerosLike);
  let v = spec.trainable.map(zerosLike);
  const others = otherIdx.map(up);
  const lossOf = (ps: JaxArray[], os: JaxArray[]): JaxArray => {
    const xs: JaxArray[] = new Array<JaxArray>(g.params.length);
    spec.trainable.forEach((e, k) => (xs[e] = ps[k]!));
    otherIdx.forEach((e, k) => (xs[e] = os[k]!));
    return trace(xs)[0]!;
  };
  const vg = jax.valueAndGrad(lossOf);
  // One jit of the whole step: (params, m, v, batch..., -lr/bc1, 1/sqrt(bc2)) →
  // (loss, params', m', v'). Every argument is consumed once (jax-js's move semantics).
  const step = jax.jit((...xs: JaxArray[]): JaxArray[] => {
    const ps = xs.slice(0, nP);
    const ms = xs.slice(nP, 2 * nP);
    const vs = xs.slice(2 * nP, 3 * nP);
    const os = xs.slice(3 * nP, 3 * nP + otherIdx.length);
    const a1 = xs[3 * nP + otherIdx.length]!;
    const a2 = xs[3 * nP + otherIdx.length + 1]!;
    const [loss, grads] = vg(
      ps.map((p) => p.ref),
      os,
    );
    const newP: JaxArray[] = [];
    const newM: JaxArray[] = [];
    const newV: JaxArray[] = [];
    for (let k = 0; k < nP; k++) {
      const gk = grads[k]!;
      const mk = np.add(np.multiply(ms[k]!, h.beta1), np.multiply(gk.ref, 1 - h.beta1));
      const vk = np.add(
        np.multiply(vs[k]!, h.beta2),
        np.multiply(np.multiply(gk.ref, gk), 1 - h.beta2),
      );
      const denom = np.add(np.multiply(np.sqrt(vk.ref), a2.ref), h.eps);
      const pk = np.add(
        np.multiply(ps[k]!, 1 - h.lr * h.weightDecay),
        np.multiply(np.trueDivide(mk.ref, denom), a1.ref),
      );
      newP.push(pk);
      newM.push(mk);
      newV.push(vk);
    }
    a1.dispose();
    a2.dispose();
    return [loss, ...newP, ...newM, ...newV];
  });
  let t = 0;
  return () => {
    t++;
    const bc1 = 1 - h.beta1 ** t;
    const bc2 = 1 - h.beta2 ** t;
    const out = step(
      ...params,
      ...m,
      ...v,
      ...others.map((o) => o.ref),
      f32(-h.lr / bc1),
      f32(1 / Math.sqrt(bc2)),
    );
    params = out.slice(1, 1 + nP);
    m = out.slice(1 + nP, 1 + 2 * nP);
    v = out.slice(1 + 2 * nP);
    return Number(out[0]!.dataSync()[0]);
  };
}

async function main(): Promise<void> {
  const runtime = NAMES[RUNTIME];
  if (runtime === undefined) throw new Error(`train_peer: unknown runtime ${RUNTIME}`);
  const g = readTrainGraph(DIR);
  const spec: TrainSpec = g.spec;
  const r: PeerTrainResult = { runtime };
  let step: Step;
  try {
    step = RUNTIME === "jax" ? await jaxStep(g) : await tfjsStep(RUNTIME === "tfjs-cpu" ? "cpu" : "wasm", g);
  } catch (e) {
    r.note = `not set up: ${e instanceof Error ? e.message : String(e)}`;
    finish(r);
    return;
  }
  let t0 = performance.now();
  const l1 = step();
  r.firstMs = performance.now() - t0;
  r.losses = [l1];
  if (!lossAgrees(l1, spec.kilnLosses[0])) {
    r.note = "first-step loss disagrees with Kiln's: not timed";
    finish(r);
    return;
  }
  t0 = performance.now();
  const l2 = step();
  const secondMs = performance.now() - t0;
  r.losses.push(l2);
  const n = stepsWithin(secondMs, spec.steps, spec.budgetMs);
  if (n < spec.steps) {
    r.note = `${n} of ${spec.steps} steps: a step takes ${(secondMs / 1000).toFixed(1)} s ` +
      `(budget ${(spec.budgetMs / 1000).toFixed(0)} s)`;
  }
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    t0 = performance.now();
    const l = step();
    times.push(performance.now() - t0);
    if (!Number.isFinite(l)) {
      r.note = `loss ${l} at timed step ${i + 1}`;
      finish(r);
      return;
    }
  }
  r.times = times;
  finish(r);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    finish({
      runtime: NAMES[RUNTIME] ?? RUNTIME,
      note: `failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`,
    });
    process.exit(0);
  },
);
