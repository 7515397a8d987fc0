// What `dump` and `explain` share: trace the model once through explain() (so graph breaks and
// replay reasons come with source lines), take the captured program, and run the optimization
// pipeline on a copy with every pass wrapped to snapshot the module after each pass that
// changed it. Wrapping the pipeline's own items keeps one definition of the pipeline: the
// snapshots are exactly what compile() would produce, with no files written.

import type { CompileOptions, Explanation } from "../compiler/index.ts";
import { explainWith } from "../compiler/index.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { parseHlo } from "../ir/parse.ts";
import { isDynamic } from "../ir/shape.ts";
import {
  DynamicPadder,
  fixpoint,
  type FixpointGroup,
  optimizationPipeline,
  type Pass,
  Pipeline,
  type PipelineItem,
} from "../passes/index.ts";
import { CliError, EXIT } from "./errors.ts";
import { argsFor, type LoadedModel, userCode } from "./load.ts";
import { formatSpec, type SizeSpec } from "./spec.ts";

export interface Capture {
  readonly explanation: Explanation;
  /** The captured program (graph mode), parsed from explain()'s text. */
  readonly captured: Module | undefined;
}

/** The compile options for a loaded model: the file's, then the command line's. */
export function compileOptionsFor(model: LoadedModel, backend: string | undefined): CompileOptions {
  const base: CompileOptions = { ...model.compileOptions, cache: "memory" };
  return backend !== undefined ? { ...base, backend } : base;
}

/** Traces `model` once on the inputs for `spec` (see the file comment). */
export function capture(
  model: LoadedModel,
  spec: SizeSpec | undefined,
  backend: string | undefined,
): Capture {
  const args = argsFor(model, spec);
  const explanation = userCode(model.name, `tracing on ${formatSpec(spec ?? {})}`, () =>
    explainWith(model.target, compileOptionsFor(model, backend), ...args),
  );
  const captured = explanation.program !== undefined ? parseHlo(explanation.program) : undefined;
  return { explanation, captured };
}

/** The program or a one-line error saying why there is no single graph (to `verb`). */
export function requireGraph(model: LoadedModel, c: Capture, verb = "dump"): Module {
  if (c.captured) return c.captured;
  const why = c.explanation.replayReasons[0];
  throw new CliError(
    EXIT.model,
    `'${model.name}' runs in replay mode (no single graph to ${verb})` +
      (why ? `: ${why.where}: ${why.reason}` : "") +
      ` — see kiln explain`,
  );
}

function isFixpoint(item: PipelineItem): item is FixpointGroup {
  return (item as Partial<FixpointGroup>).kind === "fixpoint";
}

export interface Snapshot {
  /** "captured", a pass name, or "optimized". */
  readonly stage: string;
  /** The pass that produced it (per-pass snapshots only). */
  readonly pass: string | undefined;
  readonly module: Module;
}

const PADDER = "dynamic-padder";

function hasDynamicDims(m: Module): boolean {
  return m.computations.some((c) => c.instructions.some((i) => isDynamic(i.shape)));
}

/**
 * Every pass name in the optimization pipeline (fixpoint groups and their members), after the
 * dynamic padder, which runs first on a program with bounded dynamic dims.
 */
export function pipelinePassNames(): string[] {
  const names: string[] = [];
  const walk = (items: readonly PipelineItem[]): void => {
    for (const item of items) {
      if (!names.includes(item.name)) names.push(item.name);
      if (isFixpoint(item)) walk(item.passes);
      else if (item instanceof Pipeline) walk(item.items);
    }
  };
  walk(optimizationPipeline().items);
  return [PADDER, ...names];
}

/** Runs the optimization pipeline on a copy of `captured`, snapshotting after each change. */
export function optimizeWithSnapshots(captured: Module): {
  optimized: Module;
  passes: Snapshot[];
} {
  const passes: Snapshot[] = [];
  const wrapPass = (p: Pass): Pass => ({
    name: p.name,
    run(m: Module): boolean {
      const changed = p.run(m);
      if (changed) passes.push({ stage: p.name, pass: p.name, module: cloneModule(m) });
      return changed;
    },
  });
  const wrap = (items: readonly PipelineItem[]): PipelineItem[] =>
    items.map((item) => {
      if (isFixpoint(item)) {
        return fixpoint(item.name, wrap(item.passes), item.maxIterations);
      }
      if (item instanceof Pipeline) return new Pipeline(item.name, wrap(item.items));
      return wrapPass(item);
    });
  const source = optimizationPipeline();
  const pipeline = new Pipeline(source.name, wrap(source.items), { verify: true });
  const optimized = cloneModule(captured);
  // A program with bounded dynamic dims is compiled the way compile() compiles it: padded to
  // its bounds first (the static program the backend runs), then optimized.
  if (hasDynamicDims(optimized)) {
    const padder = new DynamicPadder();
    if (padder.run(optimized)) {
      passes.push({ stage: PADDER, pass: PADDER, module: cloneModule(optimized) });
    }
  }
  pipeline.run(optimized);
  return { optimized, passes };
}
