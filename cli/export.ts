// `kiln export`: a model file's captured program (the graph compile() traces, before Kiln's own
// optimization pipeline, whose fusions are Kiln's and not XLA's) as an XLA HloModuleProto or HLO
// text file, for XLA to compile and run (docs/xla.md has the jaxlib recipe). By default the
// model's weights stay entry parameters, in the order the trace first read them, after the
// call's inputs, and `<out>.json` says what each parameter is (its path, dtype and shape);
// `--weights inline` writes them into the program as constants instead, so the file runs on the
// call's inputs alone. Constants the trace passes in (captured tensors, numbers) are always
// written into the program: nothing outside Kiln could bind them.

import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { captureProgram, type ExplainedParameter } from "../compiler/index.ts";
import { cloneModule } from "../ir/clone.ts";
import { Literal } from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import { printHlo } from "../ir/print.ts";
import { moduleToProto } from "../ir/proto.ts";
import { arrayShape, shapeToString } from "../ir/shape.ts";
import { compileOptionsFor, requireGraph } from "./capture.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { argsFor, type LoadedModel, userCode } from "./load.ts";
import { formatSpec, type SizeSpec } from "./spec.ts";

export type ExportFormat = "hlo-proto" | "hlo-text";
export type ExportWeights = "params" | "inline";

export interface ExportOptions {
  readonly spec: SizeSpec | undefined;
  readonly format: ExportFormat;
  readonly out: string;
  /** Default "params". */
  readonly weights?: ExportWeights;
}

/** One entry parameter of an exported program, as `<out>.json` lists it. */
export interface ExportedParameter {
  readonly index: number;
  readonly kind: ExplainedParameter["kind"];
  /** As guards print it (`this.layers["0"].weight`). */
  readonly path?: string;
  /** A weight's or buffer's key in the model's `stateDict()` (`layers.0.weight`). */
  readonly name?: string;
  readonly shape: string;
}

/** Writes the captured program to `o.out`; prints the file and its entry signature. */
export function exportCommand(
  model: LoadedModel,
  o: ExportOptions,
  out: (s: string) => void,
): ExitCode {
  const weights = o.weights ?? "params";
  const args = argsFor(model, o.spec);
  const cap = userCode(model.name, `tracing on ${formatSpec(o.spec ?? {})}`, () =>
    captureProgram(model.target, compileOptionsFor(model, "interpreter"), ...args),
  );
  const captured = requireGraph(model, { explanation: cap.explanation, captured: cap.module },
    "export");
  const { module, parameters } = exportedProgram(
    captured,
    cap.explanation.parameters,
    cap.values,
    weights,
  );
  const bytes = o.format === "hlo-proto" ? moduleToProto(module) : printHlo(module);
  const file = resolve(o.out);
  write(file, bytes);
  write(`${file}.json`, `${JSON.stringify({ format: o.format, weights, parameters }, null, 2)}\n`);
  const n = parameters.length;
  const names = parameters.map((p) => p.name ?? p.path ?? p.kind).join(", ");
  out(`${file}: ${o.format}, ${n} entry parameter${n === 1 ? "" : "s"}` +
    (n > 0 ? ` (${names.length > 200 ? `${names.slice(0, 200)}...` : names})` : ""));
  out(`${file}.json: what each entry parameter is`);
  return EXIT.ok;
}

/**
 * The program as exported: constant parameters (and with `inline` every weight, buffer and
 * other state) replaced by constants holding their values, the rest renumbered in order;
 * `values` are the kept parameters' values, in their new order.
 */
export function exportedProgram(
  captured: Module,
  params: readonly ExplainedParameter[],
  values: readonly Literal[],
  weights: ExportWeights,
): { module: Module; parameters: ExportedParameter[]; values: Literal[] } {
  const module = cloneModule(captured);
  const entry = module.entry;
  const old = entry.parameters;
  const keep = (p: ExplainedParameter | undefined) =>
    p !== undefined && (p.kind === "input" || p.kind === "size" ||
      (weights === "params" && p.kind !== "constant"));
  const constants: Instruction[] = [];
  const kept: { instr: Instruction; p: ExplainedParameter | undefined; k: number }[] = [];
  for (const [k, instr] of old.entries()) {
    const p = params[k];
    if (keep(p) || values[k] === undefined) {
      kept.push({ instr, p, k });
      continue;
    }
    const c = entry.addInstruction({
      opcode: "constant",
      shape: instr.shape,
      attrs: { literal: values[k]! },
      metadata: { ...instr.metadata },
    });
    instr.replaceAllUsesWith(c);
    entry.removeInstruction(instr);
    constants.push(c);
  }
  // Constants first, so every operand still comes before its users.
  entry.setOrder([...constants, ...entry.instructions.filter((i) => !constants.includes(i))]);
  const parameters = kept.map(({ instr, p }, index): ExportedParameter => {
    instr.attrs.parameterNumber = index;
    return {
      index,
      kind: p?.kind ?? "input",
      ...(p?.path !== undefined && { path: p.path }),
      ...(p?.name !== undefined && { name: p.name }),
      shape: shapeToString(instr.shape, false),
    };
  });
  const out = kept.map(({ k }) => values[k]!);
  staticEntry(module, parameters, out);
  return { module, parameters, values: out };
}

/**
 * Bounded-dynamic entry parameters in XLA's own idiom: each `f32[<=8,4]` parameter becomes a
 * static `f32[8,4]` one (its value padded with zeros to the bound) followed by
 * `set-dimension-size` with an `s32[]` size parameter per dynamic dim, appended after the
 * others (kind `size`, path `x.shape[0]`). XLA's CPU runtime does not run a dynamic entry
 * parameter (it lowers one through a `PadToStatic` custom call it does not implement); this form
 * it runs, and its dynamic padder masks the padding as Kiln's does.
 */
function staticEntry(module: Module, parameters: ExportedParameter[], values: Literal[]): void {
  const entry = module.entry;
  const params = entry.parameters;
  const added: Instruction[] = [];
  for (const [k, instr] of params.entries()) {
    const s = instr.shape;
    if (s.kind !== "array" || !s.dynamic.some((d) => d)) continue;
    const fixed = arrayShape(s.type, s.dims);
    const value = values[k]!;
    const actual = value.dims;
    const padded = entry.addInstruction({
      opcode: "parameter",
      shape: fixed,
      attrs: { parameterNumber: k },
      metadata: { ...instr.metadata },
    });
    added.push(padded);
    let cur = padded;
    const flags = [...s.dynamic];
    s.dynamic.forEach((dyn, d) => {
      if (!dyn) return;
      const size = entry.addInstruction({
        opcode: "parameter",
        shape: arrayShape("s32", []),
        attrs: { parameterNumber: parameters.length },
      });
      const index = parameters.length;
      const path = parameters[k]!.path ?? `parameter ${k}`;
      parameters.push({ index, kind: "size", path: `${path}.shape[${d}]`, shape: "s32[]" });
      values.push(new Literal("s32", [], Int32Array.of(actual[d]!)));
      // Dims not yet made dynamic are static here, the rest dynamic as in the original.
      const now = flags.map((f, i) => f && i <= d);
      const sds = entry.addInstruction({
        opcode: "set-dimension-size",
        shape: arrayShape(s.type, s.dims, now),
        operands: [cur, size],
        attrs: { dimensions: [d] },
        metadata: { ...instr.metadata },
      });
      added.push(size, sds);
      cur = sds;
    });
    instr.replaceAllUsesWith(cur);
    entry.removeInstruction(instr);
    parameters[k] = { ...parameters[k]!, shape: shapeToString(fixed, false) };
    values[k] = padLiteral(value, s.dims);
  }
  if (added.length === 0) return;
  entry.setOrder([...added, ...entry.instructions.filter((i) => !added.includes(i))]);
}

/** `lit` zero-padded at the end of every dim to `dims`. */
function padLiteral(lit: Literal, dims: readonly number[]): Literal {
  const src = lit.data as unknown as { length: number; [i: number]: number | bigint };
  const Ctor = (lit.data as unknown as { constructor: new (n: number) => typeof src }).constructor;
  const out = new Ctor(dims.reduce((a, b) => a * b, 1));
  const from = lit.dims;
  const idx = new Array<number>(from.length).fill(0);
  for (let i = 0; i < src.length; i++) {
    let o = 0;
    for (let d = 0; d < dims.length; d++) o = o * dims[d]! + idx[d]!;
    out[o] = src[i]!;
    for (let d = from.length - 1; d >= 0; d--) {
      if (++idx[d]! < from[d]!) break;
      idx[d] = 0;
    }
  }
  return new Literal(lit.type, dims, out as never);
}

function write(file: string, bytes: Uint8Array | string): void {
  try {
    writeFileSync(file, bytes);
  } catch (e) {
    const why = e instanceof Error ? e.message.split(",")[0] : String(e);
    throw new CliError(EXIT.io, `cannot write '${file}': ${why}`, e);
  }
}
