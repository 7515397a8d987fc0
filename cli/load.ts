// The model-file contract loader. A model file (`.ts` or `.js`, imported directly: `kiln.js`
// registers tsx's loader for the whole process, so the file shares Kiln's module instances
// with the CLI) default-exports one of:
//   - an nn.Module instance (compiled through its forward),
//   - an nn.Module subclass (constructed with no arguments),
//   - a factory `create(config?)` returning a module or function, recognized by the file also
//     exporting `configs` (the zoo's convention, models/README.md); --config picks the config,
//   - any other function (compiled as it is),
// and may export `inputs(spec, config?)` (the example arguments for a size spec) and
// `compileOptions` (merged under the command line's options). A bare zoo name (`gpt2`) stands
// for the zoo's file. Every failure is a one-line CliError with exit code 3 (load) or 4 (the
// model's own code threw); one in the model file (a syntax error included) ends with its
// `at file:line:col`.

import { existsSync, statSync } from "node:fs";
import { extname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { checkOptionsObject } from "../compiler/config.ts";
import type { CompileOptions } from "../compiler/index.ts";
import { nn } from "../index.ts";
import { zoo } from "../models/index.ts";
import { CliError, EXIT, firstLineAt } from "./errors.ts";
import { formatSpec, type SizeSpec } from "./spec.ts";

type AnyFunction = (...args: never[]) => unknown;

export interface LoadedModel {
  /** The path as given, for messages. */
  readonly name: string;
  /** The absolute file imported. */
  readonly file: string;
  /** What compile() takes. */
  readonly target: nn.Module | AnyFunction;
  /** Builds the arguments of one call; absent when the file exports no `inputs`. */
  readonly inputs: ((spec: SizeSpec) => unknown[]) | undefined;
  /** The file's `compileOptions` export ({} when absent). */
  readonly compileOptions: CompileOptions;
  /** How the default export was used, in words. */
  readonly kind: "module" | "module class" | "factory" | "function";
}

const EXTENSIONS = new Set([".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", ".tsx", ".jsx"]);

/** The zoo's file for a bare model name, or undefined. */
function zooFile(name: string): string | undefined {
  if (!Object.hasOwn(zoo, name)) return undefined;
  // The zoo's files have this file's extension: .ts in a checkout, .js in the built package.
  const ext = extname(fileURLToPath(import.meta.url));
  return fileURLToPath(new URL(`../models/${name}${ext}`, import.meta.url));
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

function isModuleClass(v: unknown): v is new () => nn.Module {
  return typeof v === "function" && v.prototype instanceof nn.Module;
}

/** Imports the file and applies the contract (see the file comment). */
export async function loadModel(path: string, config = "tiny"): Promise<LoadedModel> {
  const file = !path.includes("/") && extname(path) === "" ? (zooFile(path) ?? resolve(path))
    : resolve(path);
  if (!existsSync(file)) {
    throw new CliError(EXIT.load, `model file '${path}' not found`);
  }
  if (!statSync(file).isFile()) throw new CliError(EXIT.load, `'${path}' is not a file`);
  if (!EXTENSIONS.has(extname(file))) {
    throw new CliError(EXIT.load, `'${path}' is not a .ts or .js file`);
  }
  let ns: unknown;
  try {
    ns = await import(pathToFileURL(file).href);
  } catch (e) {
    throw new CliError(EXIT.load, `cannot import '${path}': ${firstLineAt(e)}`, e);
  }
  if (!isRecord(ns) || ns["default"] === undefined) {
    throw new CliError(
      EXIT.load,
      `'${path}' has no default export (export default a model, a module class or a function)`,
    );
  }
  const def = ns["default"];
  let target: nn.Module | AnyFunction;
  let kind: LoadedModel["kind"];
  const isFactory = typeof def === "function" && !isModuleClass(def) && ns["configs"] !== undefined;
  if (def instanceof nn.Module) {
    target = def;
    kind = "module";
  } else if (isModuleClass(def)) {
    target = userCode(path, "constructing the default export", () => new def());
    kind = "module class";
  } else if (isFactory) {
    const made = userCode(path, `creating the model (config '${config}')`, () =>
      (def as (c: string) => unknown)(config),
    );
    if (!(made instanceof nn.Module) && typeof made !== "function") {
      throw new CliError(
        EXIT.load,
        `'${path}': the default export's factory returned ${describe(made)}, ` +
          `not an nn.Module or a function`,
      );
    }
    target = made as nn.Module | AnyFunction;
    kind = "factory";
  } else if (typeof def === "function") {
    target = def as AnyFunction;
    kind = "function";
  } else {
    throw new CliError(
      EXIT.load,
      `'${path}': the default export is ${describe(def)}, not an nn.Module or a function`,
    );
  }
  const inputsExport = ns["inputs"];
  if (inputsExport !== undefined && typeof inputsExport !== "function") {
    throw new CliError(EXIT.load, `'${path}': 'inputs' is exported but is not a function`);
  }
  const optionsExport = ns["compileOptions"] ?? {};
  if (!isRecord(optionsExport)) {
    throw new CliError(EXIT.load, `'${path}': 'compileOptions' is exported but is not an object`);
  }
  // An unknown key is the file's error for every command (explain too), not a tracing failure.
  try {
    checkOptionsObject(optionsExport);
  } catch (e) {
    throw new CliError(EXIT.load, `'${path}': compileOptions: ${(e as Error).message}`, e);
  }
  const inputs =
    typeof inputsExport === "function"
      ? (spec: SizeSpec): unknown[] => {
          const made = userCode(path, `inputs(${formatSpec(spec)})`, () =>
            (inputsExport as (s: SizeSpec, c: string) => unknown)(spec, config),
          );
          if (!Array.isArray(made)) {
            throw new CliError(
              EXIT.model,
              `'${path}': inputs(${formatSpec(spec)}) returned ${describe(made)}, ` +
                `not an array of arguments`,
            );
          }
          return made;
        }
      : undefined;
  // The CLI inspects inference: dropout in training mode draws random numbers, which puts
  // compile() in replay mode and hides the graph. `compileOptions` cannot undo this; a model
  // that needs training mode can be a function that calls `train()` itself.
  if (target instanceof nn.Module) target.eval();
  return {
    name: path,
    file,
    target,
    inputs,
    compileOptions: optionsExport as CompileOptions,
    kind,
  };
}

/** The arguments for `spec`; a model without `inputs` can only run with no spec and no args. */
export function argsFor(model: LoadedModel, spec: SizeSpec | undefined): unknown[] {
  if (model.inputs) return model.inputs(spec ?? {});
  throw new CliError(
    EXIT.load,
    `'${model.name}' exports no inputs(spec): the CLI cannot build example arguments`,
  );
}

/** Runs the model's own code; what it throws is a one-line CliError with exit code 4. */
export function userCode<T>(path: string, what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof CliError) throw e;
    const name = e instanceof Error && e.name !== "Error" ? `${e.name}: ` : "";
    throw new CliError(EXIT.model, `'${path}' threw while ${what}: ${name}${firstLineAt(e)}`, e);
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return `an object (${v.constructor?.name ?? "no prototype"})`;
  return `a ${typeof v}`;
}
