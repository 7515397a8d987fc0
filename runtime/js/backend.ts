// The `js` backend: the first renderer of the kernel layer. A module is lowered to its step
// list (runtime/kernel/program.ts), rendered as JavaScript (render_program.ts, render_kernel.ts),
// instantiated once with `new Function`, and run on the Literals' typed arrays; intermediates
// live in one arena per executable, so a run allocates only its results. Results are
// bit-identical to the reference evaluator (ir/evaluate.ts): the `exact` tier. A module with
// bounded dynamic dims is compiled per distinct set of actual argument dims
// (runtime/kernel/specialize.ts makes the static module; up to 32 are kept). What it
// cannot run is rejected at compile time with an UnsupportedError naming the instruction:
// custom-call, and set-dimension-size to a size that is computed (not known from the shapes).
// Programs go to the on-disk program cache as their source plus recipes for the values it
// refers to (runtime/js/payload.ts), so a warm load skips codegen and only runs `new Function`.
// KILN_LOGS=ir prints the generated source, KILN_LOGS=perf the compile and load times.

import type { EvalValue } from "../../ir/evaluate.ts";
import { conformanceProblem } from "../../ir/evaluate_support.ts";
import type { LiteralData } from "../../ir/literal.ts";
import type { Computation, Module } from "../../ir/module.ts";
import { isDynamic, type Shape, shapeToString } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { log } from "../../util/log.ts";
import { type Backend, type Executable, registerBackend, UnsupportedError } from "../backend.ts";
import { lowerProgram } from "../kernel/program.ts";
import { renderJsProgram } from "./render_program.ts";
import {
  checkModule,
  decodePayload,
  encodeDynamicPayload,
  encodeStaticPayload,
  type ProgramTable,
  type StaticProgram,
} from "./payload.ts";
import { shapesKey, specializeModule, valueShape as shapeOfValue } from "../kernel/specialize.ts";
import { allocResults, leafData, resultValue } from "../kernel/io.ts";

/** An executable of the `js` backend, with the source it runs (for debugging). */
export interface JsExecutable extends Executable {
  readonly source: string;
}

type Runtime = LiteralData | Runtime[];
/** What a program's source returns: the entry computation and its arena. */
interface ProgramFns {
  entry: (views: readonly LiteralData[], ...buffers: LiteralData[]) => void;
  arenaBytes: number;
  views: (arena: ArrayBuffer) => LiteralData[];
}

/** Computations reachable from the entry (the ones that will be compiled). */
function reachable(module: Module): Computation[] {
  const seen = new Set<Computation>();
  const visit = (c: Computation) => {
    if (seen.has(c)) return;
    seen.add(c);
    for (const i of c.instructions) i.called.forEach(visit);
  };
  visit(module.entry);
  return [...seen];
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


function valueShape(v: EvalValue): string {
  return Array.isArray(v) ? `(${v.map(valueShape).join(", ")})` : `${v.type}[${v.dims.join(",")}]`;
}




/**
 * Generates the JavaScript source of `module` (what the js backend runs). A module with dynamic
 * dims needs the argument shapes it is specialized for.
 */
export function jsSource(module: Module, argShapes?: readonly Shape[]): string {
  verifyModule(module);
  if (checkSupported(module)) {
    if (!argShapes) throw new Error("jsSource: a module with dynamic dims needs argument shapes");
    return renderJs(specializeModule(module, argShapes)).source;
  }
  return renderJs(module).source;
}

/** The step list of a static module rendered as JavaScript. */
function renderJs(module: Module) {
  return renderJsProgram(lowerProgram(module, { backend: "js" }));
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
  const dyn: JsExecutable = {
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
  stored.set(dyn, { kind: "dynamic" });
  return dyn;
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
  const gen = renderJs(module);
  const source = gen.source;
  log("ir", () => `js source of module '${module.name}':\n${source}`);
  const program: StaticProgram = {
    params: module.entry.parameters.map((p) => p.shape),
    root: module.entry.root.shape,
    source,
    ext: gen.ext.values,
    constants: new Set(),
  };
  const exe = instantiate(() => module, program);
  stored.set(exe, { kind: "compiled", table: gen.ext });
  log("perf", () => `js: compiled '${module.name}' in ${(performance.now() - t0).toFixed(1)} ms`);
  return exe;
}

/**
 * The arena of a program's intermediates. Each buffer in it passed the size check when the
 * program was lowered; their sum may still be more than the process can allocate, which is an
 * error naming the module and the bytes, not a bare RangeError.
 */
function arenaBuffer(module: () => Module, bytes: number): ArrayBuffer {
  try {
    return new ArrayBuffer(bytes);
  } catch (e) {
    throw new Error(
      `js: cannot allocate the ${bytes}-byte arena for the intermediates of ` +
        `'${module().name}': ${(e as Error).message}`,
      { cause: e },
    );
  }
}

/**
 * Runs generated source once (`new Function`) on its table and wraps the entry function. The
 * program carries what a run needs; `module` is called only for `exe.module` and error messages
 * (a program loaded from the disk cache may not have decoded its module yet).
 */
function instantiate(module: () => Module, program: StaticProgram): JsExecutable {
  const { params, root, source } = program;
  const factory = new Function("ext", source) as (ext: readonly unknown[]) => ProgramFns;
  const fns = factory(program.ext);
  let views: LiteralData[] | undefined;
  let busy = false;
  return {
    backend: "js",
    get module(): Module {
      return module();
    },
    source,
    run(inputs: readonly EvalValue[]): EvalValue {
      if (inputs.length !== params.length) checkArgCount(module(), inputs.length);
      params.forEach((s, i) => {
        const problem = conformanceProblem(inputs[i]!, s);
        if (problem !== null) argError(module(), i, inputs[i]!, problem);
      });
      const args: LiteralData[] = [];
      for (const v of inputs) leafData(v, args);
      return resultValue(root, runLeaves(args), { i: 0 });
    },
    runLeaves,
  };

  function runLeaves(args: readonly LiteralData[]): LiteralData[] {
    const results: LiteralData[] = [];
    allocResults(root, results);
    // One arena per executable; a nested run (never expected) gets its own.
    const reentrant = busy;
    const v = reentrant
      ? fns.views(arenaBuffer(module, fns.arenaBytes))
      : (views ??= fns.views(arenaBuffer(module, fns.arenaBytes)));
    busy = true;
    try {
      fns.entry(v, ...args, ...results);
    } finally {
      if (!reentrant) busy = false;
    }
    return results;
  }
}

// ---- The disk cache --------------------------------------------------------------------------

// What serialize needs of each executable this backend made: a compiled program's table (its
// recipes are worked out only if it is serialized), the marker of a dynamic module, or, for one
// loaded from the cache, the payload it was loaded from (the same bytes serialize would write).
type Stored =
  | { kind: "compiled"; table: ProgramTable }
  | { kind: "dynamic" }
  | { kind: "loaded"; payload: Uint8Array };

const stored = new WeakMap<Executable, Stored>();

/** The disk cache's payload of a js executable: runtime/js/payload.ts describes it. */
function serializeJs(exe: Executable): Uint8Array {
  const s = stored.get(exe);
  if (!s) throw new Error("js: serialize got an executable the js backend did not make");
  switch (s.kind) {
    case "compiled":
      return encodeStaticPayload(exe.module, (exe as JsExecutable).source, s.table);
    case "dynamic":
      return encodeDynamicPayload(exe.module);
    case "loaded":
      return s.payload;
    default: {
      const never: never = s;
      throw new Error(`js: unknown stored kind ${String(never)}`);
    }
  }
}

/**
 * An executable from serializeJs's bytes, without codegen: the source runs through
 * `new Function` on a table rebuilt from the payload's recipes. `module` (the cache's thunk)
 * is decoded only when something needs it: a large constant, a dynamic module (re-specialized
 * per argument dims as compile does), `exe.module`, an error message; it is checked against
 * the payload's signature when it is. Throws on a payload of another codegen version or of
 * another format.
 */
function loadJs(module: () => Module, payload: Uint8Array): JsExecutable {
  const t0 = performance.now();
  const decoded = decodePayload(payload, module);
  let checked: Module | undefined;
  const checkedModule = (): Module => {
    if (!checked) {
      const m = module();
      checkModule(m, decoded.signature);
      checked = m;
    }
    return checked;
  };
  let exe: JsExecutable;
  if (decoded.kind === "dynamic") {
    const m = checkedModule();
    if (!checkSupported(m)) {
      throw new Error(`js cache payload: a dynamic program, but '${m.name}' has no dynamic dims`);
    }
    exe = compileDynamic(m);
  } else {
    exe = instantiate(checkedModule, decoded);
  }
  // A copy: the payload may be a view into the whole entry file (a Buffer's slice() shares it).
  stored.set(exe, { kind: "loaded", payload: new Uint8Array(payload) });
  log("perf", () => `js: loaded a program in ${(performance.now() - t0).toFixed(1)} ms`);
  return exe;
}

function deserializeJs(module: Module, payload: Uint8Array): JsExecutable {
  const exe = loadJs(() => module, payload);
  // The module is at hand: check it now, so a mismatch is the cache's `undecodable`.
  void exe.module;
  return exe;
}

export const jsBackend: Backend = {
  name: "js",
  priority: 10,
  tier: "exact",
  compile: compileJs,
  serialize: serializeJs,
  deserialize: deserializeJs,
  deserializeDeferred: loadJs,
};

registerBackend(jsBackend);
