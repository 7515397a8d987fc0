// Cache entries: one compiled program and the guards under which it stands in for the user's
// code, with everything a cache hit needs precomputed — a reader per program parameter
// (argument tensors by path, parameters and buffers read from their modules NOW, so
// loadStateDict needs no recompile; a size-derived number computed from the call's sizes), the
// results' structure and how each leaf is produced, and the writes the trace saw (BatchNorm's
// running statistics), repeated after the program runs. `runEntry` is the cache hit: no user
// JavaScript runs.

import type { EvalValue } from "../ir/evaluate.ts";
import { type Literal, scalarLiteral } from "../ir/literal.ts";
import type { Module } from "../ir/module.ts";
import type { ArrayShape } from "../ir/shape.ts";
import { runPadded } from "../passes/dynamic_padder.ts";
import { type Executable, single } from "../runtime/index.ts";
import { operandLiteral, tensorFromLiteral } from "../tensor/dispatch.ts";
import { type IndexCheck, raiseIndexErrors } from "../tensor/index_checks.ts";
import { Tensor } from "../tensor/tensor.ts";
import { frameAt, locate, locateHere } from "../util/user_frame.ts";
import type { Capture, OutLeaf, OutWrite } from "./capture.ts";
import { affineAt } from "./dynamic_module.ts";
import type { GuardSet } from "./guards.ts";
import type { ProgramBuild } from "./build.ts";
import { readKeys, type TreeSpec, unflatten } from "./pytree.ts";
import type { SizeGroup } from "./size_groups.ts";
import type { Binding, InputSlot, PrologueAction } from "./trace.ts";

export interface GraphEntry {
  readonly guards: GuardSet;
  readonly exe: Executable | undefined;
  readonly module: Module | undefined;
  readonly readers: readonly ((args: readonly unknown[]) => Literal)[];
  /** What each program parameter is, by parameter number (explain's `parameters`). */
  readonly params: readonly ProgramParameter[];
  readonly tuple: boolean;
  readonly outSpec: TreeSpec;
  readonly outLeaves: readonly OutLeaf[];
  readonly writes: readonly OutWrite[];
  /** Host work before the program (optimizer steps' prepareStep), in the trace's order. */
  readonly prologue: readonly PrologueAction[];
  readonly ops: number;
  readonly freeNames: readonly string[];
  /** Index checks, raised after the run; their results start at `checkAt`. */
  readonly checks: readonly IndexCheck[];
  readonly checkAt: number;
  /** Set when the program has bounded dynamic dims: the module runPadded pads for. */
  readonly dynamicModule?: Module;
}

/**
 * A program parameter: an argument tensor of the call (`input`; `path` as guards print it),
 * a parameter (`weight`) or buffer (`buffer`) of the module tree, another tensor the code
 * reached (`state`: an optimizer's moments, a gradient), a tensor or number the trace passes in
 * rather than baking it into the program (`constant`), or a bucketed program's size (`size`).
 */
export interface ProgramParameter {
  readonly kind: "input" | "weight" | "buffer" | "state" | "constant" | "size";
  readonly path?: string;
  /** A weight or buffer: the module holding it and its property (explain names it from them). */
  readonly owner?: object;
  readonly key?: string;
}

function describeBinding(bd: Binding, slots: readonly InputSlot[]): ProgramParameter {
  if (bd.kind !== "slot") return { kind: "constant" };
  const slot = slots[bd.slot]!;
  if (slot.kind === "arg") return { kind: "input", path: slot.path };
  if (slot.kind === "state") {
    const kind = slot.parameter ? "weight" : "buffer";
    return { kind, path: slot.path, owner: slot.owner, key: slot.key };
  }
  return { kind: "state", path: slot.path };
}

/** The entry for a captured call, its program and its guards. */
export function makeEntry(
  c: Capture,
  p: ProgramBuild,
  guards: GuardSet,
  groups: readonly SizeGroup[] | undefined,
  freeNames: readonly string[],
): GraphEntry {
  const { slots } = c.tracer;
  const readers = p.bindings.map((bd, k) => {
    const fit = p.affine.get(k);
    if (!fit || !p.module || !groups) return bindingReader(bd, slots);
    const type = (p.module.entry.parameters[k]!.shape as ArrayShape).type;
    const at = groups.map((g) => g.dims[0]!);
    return (a: readonly unknown[]) => {
      const v = affineAt(fit, at.map((d) => (readKeys(a, d.keys) as Tensor).shape[d.dim]!));
      return scalarLiteral(type, type === "s64" ? BigInt(v) : v);
    };
  });
  const params = p.bindings.map((bd, k): ProgramParameter =>
    p.affine.get(k) && p.module && groups ? { kind: "size" } : describeBinding(bd, slots));
  const remap = (l: OutLeaf): OutLeaf =>
    l.kind === "result" ? { kind: "result", index: p.resultIndex[l.index]! } : l;
  return {
    guards,
    exe: p.exe,
    module: p.module,
    readers,
    params,
    tuple: p.tuple,
    outSpec: c.out.spec,
    outLeaves: c.outLeaves.map(remap),
    writes: c.writes.map((w) => ({ ...w, leaf: remap(w.leaf) })),
    prologue: c.tracer.prologue,
    ops: p.ops,
    freeNames,
    checks: p.checks,
    checkAt: p.checkAt,
    ...(p.dynamicModule !== undefined && { dynamicModule: p.dynamicModule }),
  };
}

/**
 * A cache hit: runs the entry's program on `args` and rebuilds the results and the writes.
 * `traced`: the call that was just traced, whose prologue (optimizer steps' host part) ran
 * during the trace.
 */
export function runEntry(e: GraphEntry, args: readonly unknown[], traced = false): unknown {
  let results: EvalValue[] = [];
  if (!traced) for (const act of e.prologue) act();
  if (e.exe) {
    const inputs = e.readers.map((r) => r(args));
    let out: EvalValue;
    try {
      out = e.dynamicModule ? runPadded(e.exe, e.dynamicModule, inputs) : e.exe.run(inputs);
    } catch (err) {
      throw err instanceof Error ? locateRun(err, e.dynamicModule ?? e.module) : err;
    }
    results = e.tuple ? (out as EvalValue[]) : [out];
    // Out-of-range indices raise eager's error; no result or write is handed out.
    if (e.checks.length > 0) raiseIndexErrors(e.checks, results.slice(e.checkAt));
  }
  const tensors: (Tensor | undefined)[] = results.map(() => undefined);
  const produce = (l: OutLeaf): unknown => {
    switch (l.kind) {
      case "result":
        return (tensors[l.index] ??= tensorFromLiteral(single(results[l.index]!)));
      case "arg":
        return readKeys(args, l.keys);
      case "state":
        return (l.owner as Record<string, unknown>)[l.key];
      case "host":
        return l.read();
      case "const":
        return l.value instanceof Tensor ? new Tensor(l.value.impl) : l.value;
      default: {
        const never: never = l;
        throw new Error(`unknown output ${String(never)}`);
      }
    }
  };
  const value = unflatten(e.outSpec, e.outLeaves.map(produce));
  for (const w of e.writes) {
    const target = w.target as Record<string, unknown>;
    const v = produce(w.leaf);
    if (w.impl) (target[w.key] as Tensor).impl = (v as Tensor).impl;
    else target[w.key] = v;
  }
  return value;
}

/**
 * An error from running a program, at the user's line of the instruction it names (the
 * source location the tracer recorded on it), else at the compiled function's call.
 */
function locateRun(err: Error, module: Module | undefined): Error {
  const name = (err as { instruction?: unknown }).instruction;
  if (module !== undefined && typeof name === "string") {
    for (const i of module.allInstructions()) {
      if (i.name !== name) continue;
      const m = i.metadata;
      if (m.sourceFile !== undefined && m.sourceLine !== undefined) {
        return locate(err, frameAt({
          file: m.sourceFile,
          line: m.sourceLine,
          column: m.sourceColumn ?? 1,
        }));
      }
      break;
    }
  }
  return locateHere(err);
}

/** How a program parameter is read on a call. */
function bindingReader(
  bd: Binding,
  slots: readonly InputSlot[],
): (args: readonly unknown[]) => Literal {
  switch (bd.kind) {
    case "const": {
      const lit = operandLiteral(new Tensor(bd.impl));
      return () => lit;
    }
    case "scalar": {
      const lit = operandLiteral(bd.value);
      return () => lit;
    }
    case "slot": {
      const slot = slots[bd.slot]!;
      if (slot.kind === "state") {
        const owner = slot.owner as Record<string, Tensor>;
        const key = slot.key;
        return () => operandLiteral(owner[key]!);
      }
      if (slot.kind === "host") {
        const read = slot.read;
        return () => operandLiteral(read());
      }
      const keys = slot.keys;
      return (args) => operandLiteral(readKeys(args, keys) as Tensor);
    }
    default: {
      const never: never = bd;
      throw new Error(`unknown binding ${String(never)}`);
    }
  }
}
