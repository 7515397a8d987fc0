// The `js` backend: compiles a module to JavaScript source (runtime/js/codegen_program.ts and
// the kernel generators next to it), instantiates it once with `new Function`, and runs it on
// the Literals' typed arrays directly. Results are bit-identical to the reference evaluator
// (ir/evaluate.ts). A module with bounded dynamic dims is compiled per distinct set of actual
// argument dims (runtime/js/specialize.ts makes the static module; up to 32 are kept). What it
// cannot run is rejected at compile time with an UnsupportedError naming the instruction:
// custom-call, and set-dimension-size to a size that is computed (not known from the shapes).
// KILN_LOGS=ir prints the generated source, KILN_LOGS=perf the compile time.

import type { EvalValue } from "../../ir/evaluate.ts";
import { conformanceProblem } from "../../ir/evaluate_support.ts";
import { Literal, type LiteralData } from "../../ir/literal.ts";
import type { Computation, Module } from "../../ir/module.ts";
import { isDynamic, type Shape, shapeToString } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { log } from "../../util/log.ts";
import { type Backend, type Executable, registerBackend, UnsupportedError } from "../backend.ts";
import { ModuleGen } from "./codegen_program.ts";
import { shapesKey, specializeModule, valueShape as shapeOfValue } from "./specialize.ts";

/** An executable of the `js` backend, with the source it runs (for debugging). */
export interface JsExecutable extends Executable {
  readonly source: string;
}

type Runtime = LiteralData | Runtime[];
type EntryFn = (...args: Runtime[]) => Runtime;

/** Computations reachable from the entry (the ones that will be compiled). */
function reachable(module: Module): Computation[] {
  const out: Computation[] = [];
  const visit = (c: Computation) => {
    if (out.includes(c)) return;
    out.push(c);
    for (const i of c.instructions) i.called.forEach(visit);
  };
  visit(module.entry);
  return out;
}

/**
 * Throws UnsupportedError at the first instruction the backend cannot compile; returns whether
 * the module has bounded dynamic dims (then it is compiled per set of argument dims).
 */
function checkSupported(module: Module): boolean {
  let dynamic = false;
  for (const c of reachable(module)) {
    for (const i of c.instructions) {
      if (i.opcode === "custom-call") {
        throw new UnsupportedError(
          "js",
          `custom-call target '${i.attrs.customCallTarget ?? "?"}' has no JavaScript kernel`,
          i.name,
          i.opcode,
        );
      }
      if (i.opcode === "set-dimension-size") {
        const size = i.operand(1).opcode;
        if (size !== "constant" && size !== "get-dimension-size") {
          throw new UnsupportedError(
            "js",
            `the size (%${i.operand(1).name}) is computed at run time; the js backend supports ` +
              `sizes known from the shapes (a constant or a get-dimension-size); run the ` +
              `interpreter backend for data-dependent sizes`,
            i.name,
            i.opcode,
          );
        }
      }
      if (isDynamic(i.shape)) dynamic = true;
    }
  }
  return dynamic;
}

function conformance(v: EvalValue, s: Shape): string | null {
  if (s.kind === "tuple") {
    if (!Array.isArray(v)) return `expected a tuple ${shapeToString(s, false)}`;
    if (v.length !== s.elements.length) {
      return `expected a ${s.elements.length}-tuple, got a ${v.length}-tuple`;
    }
    for (let i = 0; i < v.length; i++) {
      const p = conformance(v[i]!, s.elements[i]!);
      if (p !== null) return `tuple element ${i}: ${p}`;
    }
    return null;
  }
  if (Array.isArray(v)) return `expected an array ${shapeToString(s, false)}, got a tuple`;
  if (v.type !== s.type) return `element type ${v.type} is not ${s.type}`;
  if (v.dims.length !== s.dims.length || v.dims.some((d, i) => d !== s.dims[i])) {
    return `dims [${v.dims.join(",")}] are not [${s.dims.join(",")}]`;
  }
  return null;
}

function valueShape(v: EvalValue): string {
  return Array.isArray(v) ? `(${v.map(valueShape).join(", ")})` : `${v.type}[${v.dims.join(",")}]`;
}

function toRuntime(v: EvalValue, owned: Set<object>): Runtime {
  if (Array.isArray(v)) return v.map((e) => toRuntime(e, owned));
  owned.add(v.data);
  return v.data;
}

/** Wraps results as Literals; storage shared with an input or a constant is copied. */
function fromRuntime(r: Runtime, s: Shape, shared: Set<object>, constants: Set<object>): EvalValue {
  if (s.kind === "tuple") {
    const t = r as Runtime[];
    return s.elements.map((e, i) => fromRuntime(t[i]!, e, shared, constants));
  }
  const data = r as LiteralData;
  const copy = shared.has(data) || constants.has(data);
  return new Literal(s.type, s.dims, copy ? data.slice() : data);
}

/**
 * Generates the JavaScript source of `module` (what the js backend runs). A module with dynamic
 * dims needs the argument shapes it is specialized for.
 */
export function jsSource(module: Module, argShapes?: readonly Shape[]): string {
  verifyModule(module);
  if (checkSupported(module)) {
    if (!argShapes) throw new Error("jsSource: a module with dynamic dims needs argument shapes");
    return new ModuleGen(specializeModule(module, argShapes)).source();
  }
  return new ModuleGen(module).source();
}

function compileJs(module: Module): JsExecutable {
  verifyModule(module);
  return checkSupported(module) ? compileDynamic(module) : compileStatic(module);
}

/** Most specializations kept per dynamic module (the oldest is dropped past it). */
const MAX_SPECIALIZATIONS = 32;

/** A module with bounded dynamic dims: one static program per distinct set of argument dims. */
function compileDynamic(module: Module): JsExecutable {
  const params = module.entry.parameters;
  const cache = new Map<string, JsExecutable>();
  let last: JsExecutable | undefined;
  return {
    backend: "js",
    module,
    get source(): string {
      if (!last) return `// module '${module.name}' is compiled per argument dims on each new set`;
      return `// specialized for argument shapes (${shapesKey(last.module.entry.parameters.map(
        (p) => p.shape,
      ))})\n${last.source}`;
    },
    run(inputs: readonly EvalValue[]): EvalValue {
      checkArgCount(module, inputs.length);
      params.forEach((p, i) => {
        const problem = conformanceProblem(inputs[i]!, p.shape);
        if (problem !== null) argError(module, i, inputs[i]!, problem);
      });
      const shapes = inputs.map(shapeOfValue);
      const key = shapesKey(shapes);
      let exe = cache.get(key);
      if (!exe) {
        exe = compileStatic(specializeModule(module, shapes));
        if (cache.size >= MAX_SPECIALIZATIONS) cache.delete(cache.keys().next().value!);
        cache.set(key, exe);
        log("perf", () => `js: '${module.name}' specialized for (${key})`);
      }
      last = exe;
      return exe.run(inputs);
    },
  };
}

function checkArgCount(module: Module, n: number): void {
  const want = module.entry.parameters.length;
  if (n !== want) {
    throw new Error(`js: module '${module.name}' takes ${want} argument(s), got ${n}`);
  }
}

function argError(module: Module, i: number, v: EvalValue, problem: string): never {
  const p = module.entry.parameters[i]!;
  throw new Error(
    `js: argument ${i} is ${valueShape(v)} but parameter ${i} '%${p.name}' of ` +
      `'${module.entry.name}' is ${shapeToString(p.shape, false)}: ${problem}`,
  );
}

function compileStatic(module: Module): JsExecutable {
  const t0 = performance.now();
  const gen = new ModuleGen(module);
  const source = gen.source();
  log("ir", () => `js source of module '${module.name}':\n${source}`);
  const factory = new Function("ext", source) as (ext: unknown[]) => EntryFn;
  const entry = factory(gen.ext.values);
  const params = module.entry.parameters;
  const rootShape = module.entry.root.shape;
  const constants = gen.constants;
  log("perf", () => `js: compiled '${module.name}' in ${(performance.now() - t0).toFixed(1)} ms`);
  return {
    backend: "js",
    module,
    source,
    run(inputs: readonly EvalValue[]): EvalValue {
      checkArgCount(module, inputs.length);
      params.forEach((p, i) => {
        const problem = conformance(inputs[i]!, p.shape);
        if (problem !== null) argError(module, i, inputs[i]!, problem);
      });
      const shared = new Set<object>();
      const args = inputs.map((v) => toRuntime(v, shared));
      return fromRuntime(entry(...args), rootShape, shared, constants);
    },
  };
}

export const jsBackend: Backend = {
  name: "js",
  priority: 10,
  compile: compileJs,
};

registerBackend(jsBackend);
