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
import type { Literal } from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import { printHlo } from "../ir/print.ts";
import { moduleToProto } from "../ir/proto.ts";
import { shapeToString } from "../ir/shape.ts";
import { compileOptionsFor } from "./capture.ts";
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
  if (!cap.module) {
    const why = cap.explanation.replayReasons[0];
    throw new CliError(
      EXIT.model,
      `'${model.name}' runs in replay mode (no single graph to export)` +
        (why ? `: ${why.where}: ${why.reason}` : "") +
        ` — see kiln explain`,
    );
  }
  const { module, parameters } = exportedProgram(
    cap.module,
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
  return { module, parameters, values: kept.map(({ k }) => values[k]!) };
}

function write(file: string, bytes: Uint8Array | string): void {
  try {
    writeFileSync(file, bytes);
  } catch (e) {
    const why = e instanceof Error ? e.message.split(",")[0] : String(e);
    throw new CliError(EXIT.io, `cannot write '${file}': ${why}`, e);
  }
}
