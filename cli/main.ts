// `kiln`: the command line (commander). Each command loads a model file through the contract
// in load.ts, parses size specs with spec.ts and runs a command from commands.ts. main() never
// throws and never calls process.exit: it returns the exit code (errors.ts: EXIT), printing a
// failure as ONE line `kiln <command>: <message>` — the stack only with --verbose.

import { existsSync } from "node:fs";
import { extname, resolve } from "node:path";
import { formatWithOptions } from "node:util";
import { Argument, Command, CommanderError, Option } from "commander";
import { zoo } from "../models/index.ts";
import { suggestion } from "../util/suggest.ts";
import { setLogTopics } from "../util/log.ts";
import { benchCommand } from "./bench.ts";
import {
  cacheCommand,
  dumpCommand,
  type DumpFormat,
  type DumpStage,
  explainCommand,
  recompilesCommand,
  runCommand,
} from "./commands.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { exportCommand, type ExportFormat, type ExportWeights } from "./export.ts";
import { type LoadedModel, loadModel } from "./load.ts";
import { parseShapes, parseSpec, type SizeSpec } from "./spec.ts";

const ENV_HELP = `
Environment:
  KILN_LOGS=topics     log as it happens, to stderr: recompiles, graph_breaks, guards, ir,
                       passes, lazy, fusion, perf, cache, backend (comma-separated) or all
  KILN_DUMP_DIR=dir    write every program after every pass (NNN-<pass>.hlo) while compiling
  KILN_CACHE_DIR=dir   the on-disk program cache (default $XDG_CACHE_HOME/kiln or ~/.cache/kiln)
  KILN_NATIVE=0        do not use the native backend (wasm is then the default)
  KILN_WASM=0          do not use the wasm backend (js is the default without native too)
  KILN_CC=path         the C compiler native uses (default: the first of cc, gcc, clang)
  KILN_NUM_THREADS=n   threads of native's pool and of wasm's workers (default: the CPUs this
                       process may use; wasm: 1 where there is no SharedArrayBuffer)
  KILN_POOL_SPIN_US=n  microseconds an idle pool thread spins before it sleeps (default 100)
  KILN_NATIVE_PROFILE=1  print where native programs spent their time, at exit

Exit codes:
  0  success
  1  a check failed (recompiles: more compiles than --max, or calls that ran in replay mode
     or eagerly without --allow-fallback)
  2  bad command line (unknown option, bad --shape/--shapes, unknown --pass, bad value)
  3  the model file could not be loaded (missing, import error, no usable default export)
  4  the model threw (building inputs, tracing, compiling or running)
  5  output could not be written (--out not writable)

A <model> is a .ts/.js file following the model-file contract (docs/cli.md), or a zoo name
(mlp, resnet, bert, gpt2, vit, whisper).`;

interface ModelFlags {
  shape?: string;
  config: string;
  backend?: string;
  json?: boolean;
}

function modelCommand(program: Command, name: string, description: string): Command {
  return program
    .command(name)
    .description(description)
    .argument("<model>", "model file (.ts/.js) or zoo name")
    .option("--config <name>", "config name passed to a factory default export", "tiny")
    .option("--backend <name>", "backend to compile for (default: the fastest registered)")
    .addHelpText("after", ENV_HELP);
}

/**
 * loadModel, after one check of its own: a bare name (no `/`, no extension) that is neither a
 * zoo model nor a file is a typo of a zoo name, reported with a did-you-mean and the zoo list.
 */
async function load(path: string, config: string): Promise<LoadedModel> {
  if (!path.includes("/") && extname(path) === "" && !Object.hasOwn(zoo, path) &&
    !existsSync(resolve(path))) {
    const names = Object.keys(zoo);
    throw new CliError(
      EXIT.load,
      `'${path}' is neither a zoo model nor a file${suggestion(path, names, "zoo models")}`,
    );
  }
  return loadModel(path, config);
}

function specOf(flags: ModelFlags): SizeSpec | undefined {
  return flags.shape !== undefined ? parseSpec(flags.shape) : undefined;
}

function intOption(name: string): (value: string) => number {
  return (value: string): number => {
    if (!/^[0-9]+$/.test(value)) {
      throw new CliError(EXIT.usage, `${name} '${value}' is not a non-negative integer`);
    }
    return Number(value);
  };
}

/** Builds the program; `result.code` receives the exit code of the command that ran. */
function buildProgram(
  out: (s: string) => void,
  err: (s: string) => void,
  result: { code: ExitCode },
): Command {
  const program = new Command("kiln")
    .description("Look inside Kiln's compiler: captured IR, passes, recompilations, timings")
    .option("--verbose", "print stack traces with errors")
    .showHelpAfterError(false)
    .exitOverride()
    .configureOutput({ writeOut: (s) => out(s.trimEnd()), writeErr: (s) => err(s.trimEnd()) })
    .addHelpText("after", ENV_HELP);

  modelCommand(program, "explain", "graphs, graph breaks, replay reasons, guards, fusion summary")
    .option("--shape <spec>", "input sizes, e.g. batch=2,seq=128")
    .option("--json", "machine-readable output")
    .action(async (path: string, f: ModelFlags) => {
      const model = await load(path, f.config);
      const o = { spec: specOf(f), backend: f.backend, json: f.json };
      result.code = explainCommand(model, o, out);
    });

  modelCommand(program, "dump", "the captured and per-pass IR")
    .option("--shape <spec>", "input sizes, e.g. batch=2,seq=128")
    .addOption(
      new Option("--stage <stage>", "captured | optimized (default) | all").choices([
        "captured",
        "optimized",
        "all",
      ]),
    )
    .option("--pass <regex>", "the module after each pass whose name matches (changed ones)")
    .addOption(
      new Option("--format <format>", "output format")
        .choices(["hlo", "json", "proto", "html"])
        .default("hlo"),
    )
    .option("--out <dir>", "write one file per stage into dir (NNN-<stage>.<ext>)")
    .action(
      async (
        path: string,
        f: ModelFlags & { stage?: DumpStage; pass?: string; format: DumpFormat; out?: string },
      ) => {
        const model = await load(path, f.config);
        result.code = dumpCommand(
          model,
          {
            spec: specOf(f),
            backend: f.backend,
            stage: f.stage,
            pass: f.pass,
            format: f.format,
            out: f.out,
          },
          out,
        );
      },
    );

  modelCommand(program, "run", "run once; print an output summary and timings")
    .option("--shape <spec>", "input sizes, e.g. batch=2,seq=128")
    .option("--json", "machine-readable output")
    .action(async (path: string, f: ModelFlags) => {
      const model = await load(path, f.config);
      result.code = runCommand(model, { spec: specOf(f), backend: f.backend, json: f.json }, out);
    });

  modelCommand(program, "recompiles", "call the compiled model over size specs; count compiles")
    .requiredOption("--shapes <file|list>", "specs: seq=1..512, a;b lists, or a file, one a line")
    .option("--max <n>", "fail (exit 1) when compiles exceed n", intOption("--max"))
    .option("--allow-fallback", "accept calls in replay mode or eager (they fail otherwise)")
    .option("--json", "machine-readable output")
    .action(
      async (
        path: string,
        f: ModelFlags & { shapes: string; max?: number; allowFallback?: boolean },
      ) => {
        const specs = parseShapes(f.shapes);
        const model = await load(path, f.config);
        result.code = recompilesCommand(
          model,
          {
            specs,
            backend: f.backend,
            max: f.max,
            json: f.json,
            allowFallback: f.allowFallback === true,
          },
          out,
        );
      },
    );

  modelCommand(program, "bench", "eager vs lazy vs compiled per backend: compile, median, spread")
    .option("--shape <spec>", "input sizes, e.g. batch=2,seq=128")
    .option("--backends <list>", "comma-separated backends (default: every registered one)")
    .option("--iterations <n>", "timed calls per mode after a warm-up", intOption("--iterations"))
    .option("--json", "machine-readable output")
    .action(async (path: string, f: ModelFlags & { backends?: string; iterations?: number }) => {
      const iterations = f.iterations ?? 10;
      if (iterations < 1) throw new CliError(EXIT.usage, "--iterations must be at least 1");
      const model = await load(path, f.config);
      const backends = f.backends?.split(",").map((s) => s.trim()).filter((s) => s !== "");
      result.code = benchCommand(
        model,
        { spec: specOf(f), backends, iterations, json: f.json },
        out,
      );
    });

  modelCommand(program, "export", "the captured program as an XLA HLO proto or text file")
    .option("--shape <spec>", "input sizes, e.g. batch=2,seq=128")
    .addOption(
      new Option("--format <format>", "output format")
        .choices(["hlo-proto", "hlo-text"])
        .default("hlo-proto"),
    )
    .addOption(
      new Option("--weights <how>", "weights as entry parameters or inline constants")
        .choices(["params", "inline"])
        .default("params"),
    )
    .requiredOption("--out <file>", "the file to write (and <file>.json: the parameters)")
    .action(
      async (
        path: string,
        f: ModelFlags & { format: ExportFormat; out: string; weights: ExportWeights },
      ) => {
        const model = await load(path, f.config);
        result.code = exportCommand(
          model,
          { spec: specOf(f), format: f.format, out: f.out, weights: f.weights },
          out,
        );
      },
    );

  program
    .command("cache")
    .description("the on-disk program cache (KILN_CACHE_DIR)")
    .addArgument(new Argument("<action>", "ls | clear | info").choices(["ls", "clear", "info"]))
    .option("--json", "machine-readable output")
    .addHelpText("after", ENV_HELP)
    .action((action: string, f: { json?: boolean }) => {
      result.code = cacheCommand(action, f.json === true, out);
    });
  return program;
}

/** Runs `kiln` with `argv` (without node and the script); returns the exit code. */
export async function main(
  argv: readonly string[],
  out: (s: string) => void = (s) => process.stdout.write(`${s}\n`),
  err: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
): Promise<ExitCode> {
  const result: { code: ExitCode } = { code: EXIT.ok };
  const verbose = argv.includes("--verbose");
  const command = argv.find((a) => !a.startsWith("-")) ?? "kiln";
  const program = buildProgram(out, err, result);
  // The CLI's own logging follows KILN_LOGS; tests may have switched topics off in-process.
  setLogTopics(undefined);
  // stdout is the command's report only (with --json, one JSON document): what the model
  // prints with console.log goes to stderr.
  const restore = consoleToStderr(err);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return result.code;
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help and --version are "errors" in commander's exitOverride; they exit 0.
      if (e.exitCode === 0) return EXIT.ok;
      return EXIT.usage;
    }
    if (e instanceof CliError) {
      err(`kiln ${command}: ${e.message}`);
      if (verbose && e.cause instanceof Error && e.cause.stack) err(e.cause.stack);
      else if (verbose && e.stack) err(e.stack);
      return e.code;
    }
    const msg = e instanceof Error ? e.message.split("\n")[0] : String(e);
    err(`kiln ${command}: internal error: ${msg}${verbose ? "" : " (--verbose for the stack)"}`);
    if (verbose && e instanceof Error && e.stack) err(e.stack);
    return EXIT.model;
  } finally {
    restore();
  }
}

/** Sends console.log/info/debug to `err` until the returned function puts them back. */
function consoleToStderr(err: (s: string) => void): () => void {
  const saved = { log: console.log, info: console.info, debug: console.debug };
  const write = (...xs: unknown[]) => err(formatWithOptions({ colors: false }, ...xs));
  console.log = write;
  console.info = write;
  console.debug = write;
  return () => Object.assign(console, saved);
}
