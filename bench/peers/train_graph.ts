// The training bench's peer rows (bench/train.ts), the half free of any peer package: capturing
// a model's loss graph (forward + cross-entropy, as lazy mode builds it — the same capture
// bench/peers/run.ts does for the inference rows), telling which of its entry parameters are
// the model's trainable parameters, the files a peer child (bench/peers/train_peer.ts) reads,
// and the pure helpers the rows are built from (tests: test/bench/train_peers.test.ts).

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { clearLazyGraphs, lazy, noGrad, type Tensor } from "../../index.ts";
import type { EvalValue } from "../../ir/evaluate.ts";
import { Literal, storageCtor } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import type { ElementType } from "../../ir/shape.ts";
import type { Executable } from "../../runtime/backend.ts";
import type { CacheResult } from "../../runtime/cache.ts";
import { ProgramCache } from "../../runtime/index.ts";

/** What a peer child prints before its JSON on stdout. */
export const TRAIN_RESULT_MARK = "KILN_TRAIN_PEER_RESULT ";

export interface CapturedGraph {
  module: Module;
  /** The entry parameters' values, in order (weights, ids, labels: whatever the graph reads). */
  params: Literal[];
}

class Captured extends Error {
  constructor(readonly graph: CapturedGraph) {
    super("bench: graph captured");
  }
}

/** Records the module lazy mode hands the cache and the values it is run on, then stops. */
class CapturingCache extends ProgramCache {
  override getOrCompile(module: Module): CacheResult {
    const executable: Executable = {
      backend: "capture",
      module,
      run(inputs: readonly EvalValue[]): EvalValue {
        const params = inputs.map((v, i) => {
          if (!(v instanceof Literal)) throw new Error(`bench: parameter ${i} is a tuple`);
          return v;
        });
        throw new Captured({ module, params });
      },
    };
    return { executable, hit: "miss", key: "capture" };
  }
}

/** The whole graph of `f` (a scalar loss) as lazy mode builds it, with its inputs. */
export function captureGraph(f: () => Tensor): CapturedGraph {
  clearLazyGraphs();
  try {
    const cache = new CapturingCache({ disk: false });
    noGrad(() => lazy(f, { backend: "js", cache, maxDepth: 1e9, cutRepeats: false }).data());
  } catch (e) {
    const c = e instanceof Captured ? e : e instanceof Error ? e.cause : undefined;
    if (c instanceof Captured) return c.graph;
    throw e;
  } finally {
    clearLazyGraphs();
  }
  throw new Error("bench: lazy mode compiled nothing");
}

/** An array's element type, dims and bytes: what `trainableSlots` compares. */
export interface ArrayFacts {
  type: string;
  dims: readonly number[];
  data: ArrayBufferView;
}

function sameBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/**
 * For each of the model's parameters (in order), the entry parameter of the captured graph that
 * holds it: the first one not yet taken with the same type, dims and bytes (a lazy graph reads
 * a parameter's value, so identity is lost; two parameters with equal values — LayerNorm's
 * ones, say — are interchangeable for the loss). Throws when a parameter has no slot (the graph
 * folded it into a constant, or never reads it): its peer could not train it.
 */
export function trainableSlots(
  entry: readonly ArrayFacts[],
  weights: readonly ArrayFacts[],
): number[] {
  const taken = new Set<number>();
  return weights.map((w, k) => {
    const i = entry.findIndex(
      (p, j) =>
        !taken.has(j) &&
        p.type === w.type &&
        p.dims.length === w.dims.length &&
        p.dims.every((d, q) => d === w.dims[q]) &&
        sameBytes(p.data, w.data),
    );
    if (i < 0) {
      throw new Error(
        `parameter ${k} ${w.type}[${w.dims.join(",")}] is not an input of the loss graph`,
      );
    }
    taken.add(i);
    return i;
  });
}

/** AdamW's hyperparameters, as Kiln's optimizer in the bench runs them. */
export interface AdamWHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

/** What the parent tells a peer child besides the graph. */
export interface TrainSpec {
  name: string;
  /** Entry parameter index of each trainable parameter. */
  trainable: number[];
  hyper: AdamWHyper;
  /** Kiln's losses of the first two eager steps from the same weights and batch. */
  kilnLosses: [number, number];
  /** Timed steps wanted after the two checked ones. */
  steps: number;
  /** Stop adding timed steps once this much time would be spent on them. */
  budgetMs: number;
}

/** What a peer child prints (after TRAIN_RESULT_MARK). */
export interface PeerTrainResult {
  runtime: string;
  /** The first step (trace, compile, the first update), ms. */
  firstMs?: number;
  /** The peer's losses of steps 1 and 2. */
  losses?: number[];
  /** Timed steps, ms each. */
  times?: number[];
  /** Why there is no timing, or what limited it. */
  note?: string;
}

interface ParamMeta {
  type: ElementType;
  dims: number[];
  offset: number;
  bytes: number;
}

/** The graph (proto), its parameters (raw bytes + a JSON index) and the spec, into `dir`. */
export function writeTrainGraph(dir: string, g: CapturedGraph, spec: TrainSpec): void {
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
  writeFileSync(join(dir, "train.json"), JSON.stringify({ params: metas, spec }));
}

export function readTrainGraph(dir: string): CapturedGraph & { spec: TrainSpec } {
  const module = moduleFromProto(new Uint8Array(readFileSync(join(dir, "module.pb"))));
  const index = JSON.parse(readFileSync(join(dir, "train.json"), "utf8")) as {
    params: ParamMeta[];
    spec: TrainSpec;
  };
  const all = readFileSync(join(dir, "params.bin"));
  const params = index.params.map((m) => {
    const Ctor = storageCtor(m.type);
    const data = new Ctor(m.bytes / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(data.buffer).set(all.subarray(m.offset, m.offset + m.bytes));
    return new Literal(m.type, m.dims, data);
  });
  return { module, params, spec: index.spec };
}

/**
 * Whether a peer's first-step loss agrees with Kiln's: |peer - kiln| <= 1e-3 * max(1, |kiln|).
 * The loss is a mean over the batch of log-softmax terms; float32 reassociation across a deep
 * forward moves it by ~1e-5 relative, while a wrong op (a transposed weight, a lost mask) moves
 * it by O(1e-2) or more.
 */
export const LOSS_RTOL = 1e-3;
export function lossAgrees(peer: number, kiln: number): boolean {
  return Number.isFinite(peer) && Math.abs(peer - kiln) <= LOSS_RTOL * Math.max(1, Math.abs(kiln));
}

/**
 * How many timed steps to run when one step takes `stepMs`: `wanted`, fewer when they would
 * exceed `budgetMs`, at least one.
 */
export function stepsWithin(stepMs: number, wanted: number, budgetMs: number): number {
  if (!(stepMs > 0)) return wanted;
  return Math.max(1, Math.min(wanted, Math.floor(budgetMs / stepMs)));
}

/** Median of step times (ms); the upper middle for an even count, as bench/train.ts takes it. */
export function medianMs(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error("medianMs: no steps were timed");
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** A training-step rate with bench/train.ts's digits. */
export function fmtRate(v: number): string {
  return Number.isNaN(v) ? "-" : v >= 10 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v.toFixed(3);
}

/**
 * One peer row of the training table: workload, runtime, steps/s, x Kiln compiled (peer step
 * time / Kiln compiled step time: > 1 means the peer is slower), the first step, the loss check
 * (Kiln's and the peer's first loss, and how each loss moved over the first update), a note.
 */
export function peerRowCells(
  workload: string,
  r: PeerTrainResult,
  kilnLosses: readonly [number, number],
  kilnCompiledStepsPerS: number,
): string[] {
  const rate = r.times && r.times.length > 0 ? 1000 / medianMs(r.times) : NaN;
  const x = Number.isNaN(rate) || Number.isNaN(kilnCompiledStepsPerS)
    ? "-"
    : `${fmtRate(kilnCompiledStepsPerS / rate)}x`;
  const first = r.firstMs === undefined ? "-" : `${(r.firstMs / 1000).toFixed(1)} s`;
  let check = "-";
  if (r.losses && r.losses.length > 0) {
    const [p1, p2] = r.losses as [number, number | undefined];
    const d = Math.abs(p1 - kilnLosses[0]);
    check = `${p1.toFixed(5)} vs ${kilnLosses[0].toFixed(5)} (diff ${d.toExponential(1)}` +
      `${lossAgrees(p1, kilnLosses[0]) ? ", ok" : ", MISMATCH"})`;
    if (p2 !== undefined) {
      check += `; step 2 moved ${(p2 - p1).toExponential(2)} vs Kiln ` +
        `${(kilnLosses[1] - kilnLosses[0]).toExponential(2)}`;
    }
  }
  const runs = r.times ? `${r.times.length} timed steps` : undefined;
  const note = [runs, r.note].filter((s) => s !== undefined).join("; ");
  return [workload, r.runtime, fmtRate(rate), x, first, check, note];
}

export const PEER_HEADER = [
  "workload",
  "runtime",
  "steps/s",
  "x Kiln compiled",
  "first step",
  "loss 1: peer vs Kiln; change over step 1's update",
  "note",
];
