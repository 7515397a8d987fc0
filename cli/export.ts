// `kiln export`: a model file's captured program (the graph compile() traces, before Kiln's own
// optimization pipeline, whose fusions are Kiln's and not XLA's) as an XLA HloModuleProto or HLO
// text file, for XLA to compile and run (docs/xla.md has the jaxlib recipe). The model's weights
// stay entry parameters, in the order the trace first read them, after the call's inputs.

import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { printHlo } from "../ir/print.ts";
import { moduleToProto } from "../ir/proto.ts";
import { capture, requireGraph } from "./capture.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import type { LoadedModel } from "./load.ts";
import type { SizeSpec } from "./spec.ts";

export type ExportFormat = "hlo-proto" | "hlo-text";

export interface ExportOptions {
  readonly spec: SizeSpec | undefined;
  readonly format: ExportFormat;
  readonly out: string;
}

/** Writes the captured program to `o.out`; prints the file and its entry signature. */
export function exportCommand(
  model: LoadedModel,
  o: ExportOptions,
  out: (s: string) => void,
): ExitCode {
  const graph = requireGraph(model, capture(model, o.spec, "interpreter"));
  const bytes = o.format === "hlo-proto" ? moduleToProto(graph) : printHlo(graph);
  const file = resolve(o.out);
  try {
    writeFileSync(file, bytes);
  } catch (e) {
    const why = e instanceof Error ? e.message.split(",")[0] : String(e);
    throw new CliError(EXIT.io, `cannot write '${file}': ${why}`, e);
  }
  const params = graph.entry.parameters.length;
  out(`${file}: ${o.format}, ${params} entry parameter${params === 1 ? "" : "s"}`);
  return EXIT.ok;
}
