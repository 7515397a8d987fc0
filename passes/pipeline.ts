// The pass pipeline, as XLA's HloPassPipeline: an ordered list of passes and fixpoint groups
// that is itself a Pass. A fixpoint group repeats its passes until none changes the module; if
// they still change it after maxIterations it stops and reports which passes kept changing (a
// cycle check). Around every pass the pipeline can run the verifier (on by default in tests and
// when dumping), skip passes disabled by name, write the module after each pass that changed it
// (`KILN_DUMP_DIR`: `000-input.hlo`, `001-<pass>.hlo`, ...), and time each pass into `report`
// (printed with `KILN_LOGS=passes`). An exception inside a pass is rethrown naming the pass.

import { writeDumpFile } from "./dump_fs.ts";
import type { Module } from "../ir/module.ts";
import { printHlo } from "../ir/print.ts";
import { verifyModule } from "../ir/verify.ts";
import { log, logEnabled } from "../util/log.ts";
import { ConstantFolding } from "./constant_fold.ts";
import { CSE } from "./cse.ts";
import { DCE } from "./dce.ts";
import type { Pass } from "./pass.ts";
import { AlgebraicSimplifier } from "./simplify.ts";

/** A group of passes repeated until none of them changes the module. */
export interface FixpointGroup {
  readonly kind: "fixpoint";
  readonly name: string;
  readonly passes: readonly PipelineItem[];
  readonly maxIterations: number;
}

export type PipelineItem = Pass | FixpointGroup;

/** `passes` repeated until a whole round changes nothing, at most `maxIterations` rounds. */
export function fixpoint(
  name: string,
  passes: readonly PipelineItem[],
  maxIterations = 25,
): FixpointGroup {
  if (!Number.isInteger(maxIterations) || maxIterations < 1) {
    throw new Error(
      `fixpoint '${name}': maxIterations must be an integer >= 1, got ${maxIterations}`,
    );
  }
  return { kind: "fixpoint", name, passes: [...passes], maxIterations };
}

function isFixpoint(item: PipelineItem): item is FixpointGroup {
  return (item as Partial<FixpointGroup>).kind === "fixpoint";
}

export interface PipelineOptions {
  /**
   * Run verifyModule on the input and after every pass. Default: on when running under vitest
   * (VITEST or NODE_ENV=test) or when dumping.
   */
  verify?: boolean;
  /** Names of passes (or fixpoint groups) to skip. */
  disable?: readonly string[];
  /** Where to write `NNN-<pass>.hlo` after each pass that changed the module (KILN_DUMP_DIR). */
  dumpDir?: string;
  /**
   * What a fixpoint group does when it still changes the module after maxIterations: "warn"
   * (default: stop, record it in the report and log it) or "error" (throw a PassError).
   */
  onNoFixpoint?: "warn" | "error";
}

/** One line of `Pipeline.report`: a pass (totalled over its runs) or a fixpoint group. */
export interface PassReport {
  name: string;
  /** "pass" or "fixpoint". */
  kind: "pass" | "fixpoint";
  /** The fixpoint group the pass ran in, if any (innermost). */
  group?: string;
  /** Milliseconds spent in it, over all its runs. */
  ms: number;
  /** True when any run changed the module. */
  changed: boolean;
  /** Runs of the pass, or rounds of the group. */
  iterations: number;
  /** A group that hit maxIterations: the passes that changed the module in its last round. */
  keptChanging?: string[];
}

/** A failure inside a pass (or the verifier after it), naming the pass. */
export class PassError extends Error {
  readonly pass: string;

  constructor(pass: string, detail: string, cause?: unknown) {
    super(`pass '${pass}': ${detail}`);
    this.name = "PassError";
    this.pass = pass;
    if (cause !== undefined) this.cause = cause;
  }
}

function defaultVerify(dumpDir: string | undefined): boolean {
  return (
    process.env["VITEST"] !== undefined ||
    process.env["NODE_ENV"] === "test" ||
    dumpDir !== undefined
  );
}

/** A file-name-safe form of a pass name. */
function fileSafe(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]+/g, "_");
}

interface RunState {
  dumpIndex: number;
  reports: Map<string, PassReport>;
  order: PassReport[];
  /** One set per fixpoint round in progress (innermost last): what changed in that round. */
  changers: Set<string>[];
}

export class Pipeline implements Pass {
  readonly name: string;
  readonly items: readonly PipelineItem[];
  readonly verify: boolean;
  readonly disabled: ReadonlySet<string>;
  readonly dumpDir: string | undefined;
  readonly onNoFixpoint: "warn" | "error";
  /** Timing and change report of the last run, in the order passes first ran. */
  report: PassReport[] = [];
  /** Fixpoint groups of the last run that hit maxIterations, in words. */
  warnings: string[] = [];

  constructor(name: string, items: readonly PipelineItem[], options: PipelineOptions = {}) {
    this.name = name;
    this.items = [...items];
    const dump = options.dumpDir ?? process.env["KILN_DUMP_DIR"];
    this.dumpDir = dump !== undefined && dump !== "" ? dump : undefined;
    this.verify = options.verify ?? defaultVerify(this.dumpDir);
    this.disabled = new Set(options.disable ?? []);
    this.onNoFixpoint = options.onNoFixpoint ?? "warn";
  }

  run(module: Module): boolean {
    const state: RunState = { dumpIndex: 0, reports: new Map(), order: [], changers: [] };
    this.warnings = [];
    if (this.verify) this.check(module, "input", "the input module is invalid");
    this.dump(module, state, "input");
    let changed = false;
    try {
      changed = this.runItems(module, this.items, state, undefined);
    } finally {
      this.report = state.order;
      if (logEnabled("passes")) log("passes", this.formatReport());
    }
    return changed;
  }

  /** The report as a table: name, ms, changed, iterations. */
  formatReport(): string {
    const rows = this.report.map((r) => {
      const name = r.group !== undefined ? `  ${r.name}` : r.name;
      const extra = r.keptChanging ? `  kept changing: ${r.keptChanging.join(", ")}` : "";
      return (
        `${name.padEnd(28)} ${r.ms.toFixed(2).padStart(9)} ms  ` +
        `${r.changed ? "changed" : "-      "}  x${r.iterations}${extra}`
      );
    });
    return [`pipeline '${this.name}':`, ...rows].join("\n");
  }

  private runItems(
    module: Module,
    items: readonly PipelineItem[],
    state: RunState,
    group: string | undefined,
  ): boolean {
    let changed = false;
    for (const item of items) {
      if (this.disabled.has(item.name)) continue;
      if (isFixpoint(item)) {
        if (this.runFixpoint(module, item, state, group)) changed = true;
      } else if (item instanceof Pipeline) {
        // A nested pipeline runs inline: one dump sequence, one report, this one's settings.
        if (this.runItems(module, item.items, state, group)) changed = true;
      } else if (this.runPass(module, item, state, group)) {
        changed = true;
      }
    }
    return changed;
  }

  private runFixpoint(
    module: Module,
    g: FixpointGroup,
    state: RunState,
    outer: string | undefined,
  ): boolean {
    const entry = this.entry(state, g.name, "fixpoint", outer);
    const start = performance.now();
    let changed = false;
    let converged = false;
    let changers = new Set<string>();
    try {
      for (let round = 0; round < g.maxIterations; round++) {
        entry.iterations++;
        changers = new Set<string>();
        state.changers.push(changers);
        let roundChanged: boolean;
        try {
          roundChanged = this.runItems(module, g.passes, state, g.name);
        } finally {
          state.changers.pop();
        }
        if (!roundChanged) {
          converged = true;
          break;
        }
        changed = true;
      }
    } finally {
      entry.ms += performance.now() - start;
      entry.changed ||= changed;
    }
    if (changed) state.changers[state.changers.length - 1]?.add(g.name);
    if (!converged) {
      entry.keptChanging = [...changers];
      const msg =
        `fixpoint '${g.name}' still changed the module after ${g.maxIterations} iterations; ` +
        `passes that kept changing it: ${entry.keptChanging.join(", ")}`;
      this.warnings.push(msg);
      log("passes", msg);
      if (this.onNoFixpoint === "error") throw new PassError(g.name, msg);
    }
    return changed;
  }

  private runPass(
    module: Module,
    pass: Pass,
    state: RunState,
    group: string | undefined,
  ): boolean {
    const entry = this.entry(state, pass.name, "pass", group);
    const start = performance.now();
    let changed: boolean;
    try {
      changed = pass.run(module);
    } catch (e) {
      entry.ms += performance.now() - start;
      if (e instanceof PassError) throw e;
      const detail = e instanceof Error ? e.message : String(e);
      throw new PassError(pass.name, `failed: ${detail}`, e);
    }
    entry.ms += performance.now() - start;
    entry.iterations++;
    entry.changed ||= changed;
    if (changed) state.changers[state.changers.length - 1]?.add(pass.name);
    // Dump first, so a module the verifier rejects can still be looked at.
    if (changed) this.dump(module, state, pass.name);
    if (this.verify) {
      this.check(module, pass.name, "left an invalid module (verifier ran after it)");
    }
    return changed;
  }

  private entry(
    state: RunState,
    name: string,
    kind: "pass" | "fixpoint",
    group: string | undefined,
  ): PassReport {
    const key = `${kind}:${group ?? ""}/${name}`;
    let r = state.reports.get(key);
    if (!r) {
      r = { name, kind, ms: 0, changed: false, iterations: 0 };
      if (group !== undefined) r.group = group;
      state.reports.set(key, r);
      state.order.push(r);
    }
    return r;
  }

  private check(module: Module, pass: string, what: string): void {
    try {
      verifyModule(module);
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      throw new PassError(pass, `${what}: ${detail}`, e);
    }
  }

  private dump(module: Module, state: RunState, passName: string): void {
    if (this.dumpDir === undefined) return;
    const file = `${String(state.dumpIndex).padStart(3, "0")}-${fileSafe(passName)}.hlo`;
    state.dumpIndex++;
    let text: string;
    try {
      text = printHlo(module);
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      throw new PassError(passName, `the module after it cannot be printed for ${file}: ${detail}`);
    }
    writeDumpFile(this.dumpDir, file, text);
  }
}

/**
 * The simplification group every pipeline starts with: algebraic simplification, constant
 * folding, CSE and DCE, repeated until nothing changes.
 */
export function simplificationGroup(maxIterations = 25): FixpointGroup {
  return fixpoint(
    "simplify",
    [new AlgebraicSimplifier(), new ConstantFolding(), new CSE(), new DCE()],
    maxIterations,
  );
}

/**
 * The standard pipeline: the simplification group, then `extra` in order. This is the
 * extension point for the later stages (dynamic padding, fusion, buffer assignment), which
 * pass their passes here: `defaultPipeline(options, [new FuseElementwise(), ...])`.
 */
export function defaultPipeline(
  options: PipelineOptions = {},
  extra: readonly PipelineItem[] = [],
): Pipeline {
  return new Pipeline("default", [simplificationGroup(), ...extra], options);
}
