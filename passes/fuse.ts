// The fusion passes, as XLA's: `fuse-reductions` (kInput: reduces with their elementwise
// producers and their broadcast-back epilogue, so softmax or layer norm is one kernel),
// `fuse-output` (kOutput: a dot/convolution with its elementwise epilogue) and
// `fuse-elementwise` (kLoop: chains of elementwise and data-movement ops). Run them in that
// order (`fusionPasses()`): the specific kinds first claim their heroes' neighbours, then loop
// fusion takes what is left. Also here: explainFusion (every decision with its reason, for
// tests and tools) and fusionSummary (kernels by kind, ops per kernel). The rules live in
// fuse_rules.ts, the driver in fuse_grow.ts, the rewrite in fuse_build.ts.

import type { FusionKind } from "../ir/attributes.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { Pass } from "./pass.ts";
import {
  type FusionPolicy,
  type FusionRecord,
  fusibleComputations,
  runFusion,
} from "./fuse_grow.ts";

export { describeRecord, type FusionRecord } from "./fuse_grow.ts";
export type { Decision } from "./fuse_rules.ts";

/** A fusion pass; `decisions` holds what its last run decided, with reasons. */
export class FusionPass implements Pass {
  readonly name: string;
  decisions: FusionRecord[] = [];
  private readonly policy: FusionPolicy;

  constructor(target: Exclude<FusionKind, "kCustom">) {
    this.name = PASS_NAMES[target];
    this.policy = { passName: this.name, target };
  }

  run(module: Module): boolean {
    this.decisions = [];
    return runFusion(module, this.policy, this.decisions);
  }
}

const PASS_NAMES = {
  kLoop: "fuse-elementwise",
  kInput: "fuse-reductions",
  kOutput: "fuse-output",
} satisfies { [K in Exclude<FusionKind, "kCustom">]: string };

/** kLoop fusion of elementwise and data-movement chains. */
export function fuseElementwise(): FusionPass {
  return new FusionPass("kLoop");
}

/** kInput fusion: reductions with their producers and broadcast-back epilogues. */
export function fuseReductions(): FusionPass {
  return new FusionPass("kInput");
}

/** kOutput fusion: a dot or convolution with its elementwise epilogue. */
export function fuseOutput(): FusionPass {
  return new FusionPass("kOutput");
}

/** The three fusion passes in the order they are meant to run. */
export function fusionPasses(): FusionPass[] {
  return [fuseReductions(), fuseOutput(), fuseElementwise()];
}

/**
 * Runs the fusion passes on a copy of `module` and returns every decision (yes with the fusion
 * made, or no with the reason). The module itself is not changed.
 */
export function explainFusion(module: Module): FusionRecord[] {
  const copy = cloneModule(module);
  const out: FusionRecord[] = [];
  for (const p of fusionPasses()) {
    p.run(copy);
    out.push(...p.decisions);
  }
  return out;
}

/** One kernel: a fusion, or an instruction that runs as its own kernel. */
export interface KernelInfo {
  /** The fusion instruction's or the unfused instruction's name. */
  readonly name: string;
  readonly computation: string;
  readonly kind: FusionKind | "unfused";
  /** The fused computation, for fusions. */
  readonly fused?: string;
  /** Instructions in the kernel (parameters of a fused computation not counted). */
  readonly ops: number;
  /** The ROOT opcode of a fusion, or the instruction's own opcode. */
  readonly root: string;
}

export interface FusionSummary {
  /** Kernels a backend launches: fusions plus unfused compute instructions. */
  readonly kernels: number;
  readonly byKind: Readonly<Record<FusionKind | "unfused", number>>;
  readonly list: readonly KernelInfo[];
}

// Instructions that launch no kernel: values that exist already (parameters, constants),
// bookkeeping on tuples, control flow (its bodies' kernels are counted), and reshape, which on
// row-major buffers is a view of the same bytes (XLA's bitcast).
const NOT_KERNELS = new Set([
  "parameter",
  "constant",
  "tuple",
  "get-tuple-element",
  "while",
  "conditional",
  "call",
  "reshape",
]);

/** Kernels by kind and ops per kernel over the entry and the bodies fusion works in. */
export function fusionSummary(module: Module): FusionSummary {
  const list: KernelInfo[] = [];
  const byKind: Record<FusionKind | "unfused", number> = {
    kLoop: 0,
    kInput: 0,
    kOutput: 0,
    kCustom: 0,
    unfused: 0,
  };
  for (const c of fusibleComputations(module)) {
    for (const i of c.instructions) {
      const k = kernelOf(c, i);
      if (k === undefined) continue;
      list.push(k);
      byKind[k.kind]++;
    }
  }
  return { kernels: list.length, byKind, list };
}

function kernelOf(c: Computation, i: Instruction): KernelInfo | undefined {
  if (i.opcode === "fusion") {
    const body = i.called[0]!;
    return {
      name: i.name,
      computation: c.name,
      kind: i.attrs.fusionKind ?? "kCustom",
      fused: body.name,
      ops: body.instructions.filter((x) => x.opcode !== "parameter").length,
      root: body.root.opcode,
    };
  }
  if (NOT_KERNELS.has(i.opcode)) return undefined;
  return { name: i.name, computation: c.name, kind: "unfused", ops: 1, root: i.opcode };
}

/** A printable table of the summary, one kernel per line. */
export function formatFusionSummary(s: FusionSummary): string {
  const kinds = (Object.keys(s.byKind) as (keyof FusionSummary["byKind"])[])
    .filter((k) => s.byKind[k] > 0)
    .map((k) => `${k}=${s.byKind[k]}`)
    .join(" ");
  const lines = s.list.map(
    (k) =>
      `  %${k.name} ${k.kind}${k.fused ? ` calls=%${k.fused}` : ""} ops=${k.ops} root=${k.root}`,
  );
  return [`${s.kernels} kernels (${kinds})`, ...lines].join("\n");
}
