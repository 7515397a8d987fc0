// nn.Module and nn.Parameter: the containers of a model's state. A module's parameters and
// submodules are found by LAZY DISCOVERY: they are its own enumerable properties whose values
// are Parameters or Modules, read when namedParameters()/children()/stateDict() is called. That
// covers both ways of writing a model — class fields (`fc1 = new nn.Linear(4, 8)`, defined
// after the base constructor has run, which a constructor-time registry could not see) and
// `this.fc1 = ...` in the constructor — with no Proxy in the way of every property access (and
// of the compiler's own Proxy later). Property order is registration order, so state-dict keys
// come out in PyTorch's order: a module's parameters, then its persistent buffers, then each
// child's keys under `child.`. Buffers are plain Tensors that a module marks with
// registerBuffer (a Tensor property alone is not state, as in PyTorch). Tensors are immutable,
// so loading a state dict or `to(dtype)` gives each Parameter a new value in place (its
// identity is kept, as PyTorch's copy_ keeps it) and replaces buffer properties.

import { DTYPES, type DType, isDType, isFloatingDType } from "../dtype.ts";
import { OpError } from "../errors.ts";
import { to } from "../ops/core.ts";
import { runModuleCall } from "../module_calls.ts";
import { shapeString } from "../shape.ts";
import { Tensor } from "../tensor.ts";
import { addIndent } from "./repr.ts";

/**
 * A Tensor that is a module's parameter: a Tensor subclass sharing the value of the tensor it
 * was made from, a leaf of the autograd graph that requires grad by default (a parameter that is
 * not floating point, or `new Parameter(t, false)`, does not). Ops on it return plain Tensors.
 */
export class Parameter extends Tensor {
  constructor(data: Tensor, requiresGrad = true) {
    if (!(data instanceof Tensor)) {
      throw new OpError("Parameter", `data must be a Tensor, got ${describe(data)}`);
    }
    super(data.impl);
    this.requiresGrad = requiresGrad && isFloatingDType(data.dtype);
  }

  override toString(): string {
    return `Parameter containing:\n${super.toString()}`;
  }
}

/** What loadStateDict reports, as PyTorch's `_IncompatibleKeys`. */
export interface LoadResult {
  missingKeys: string[];
  unexpectedKeys: string[];
}

export interface LoadOptions {
  /** Missing or unexpected keys are an error (default true); shape/dtype mismatches always are. */
  strict?: boolean;
}

/** loadStateDict failed; the module is unchanged. Lists every problem found. */
export class StateDictError extends OpError {
  readonly missingKeys: string[];
  readonly unexpectedKeys: string[];
  readonly problems: string[];

  constructor(module: string, problems: string[], result: LoadResult) {
    super(
      "loadStateDict",
      `${problems.length} error(s) loading a state dict into ${module} ` +
        `(the module is unchanged):\n  ${problems.join("\n  ")}`,
    );
    this.name = "StateDictError";
    this.problems = problems;
    this.missingKeys = result.missingKeys;
    this.unexpectedKeys = result.unexpectedKeys;
  }
}

/** A state dict as stateDict() returns it, or any name → Tensor mapping. */
export type StateDict = Readonly<Record<string, Tensor>> | ReadonlyMap<string, Tensor>;

/** Anything with a forward method (what `call` runs). */
export interface Forward {
  forward(...args: never[]): unknown;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (v instanceof Tensor) return `a ${v.dtype} tensor of shape ${shapeString(v.shape)}`;
  if (typeof v === "object") return `a ${(v as object).constructor?.name ?? "object"}`;
  return typeof v;
}

function tensorDesc(t: Tensor): string {
  return `${shapeString(t.shape)} ${t.dtype}`;
}

/**
 * Where a module keeps its registry of buffer names. Module's internals are this symbol-keyed
 * property and module-level functions rather than `#private` members, because `#private`
 * members throw when reached through a Proxy — and the compiler's tracer wraps modules in one.
 */
const BUFFERS: unique symbol = Symbol("kiln.nn.buffers");

/** One state-dict slot: where a key's value lives. */
interface Slot {
  key: string;
  module: Module;
  name: string;
  kind: "parameter" | "buffer";
  value: Tensor;
}

/**
 * The base of every layer and model. Subclasses assign Parameters, Modules and (through
 * registerBuffer) buffers as properties, and define `forward`; `call` runs it.
 */
export class Module {
  /** Training mode (train()/eval() set it on every submodule). */
  training = true;
  /** Registered buffer names → persistent (in the state dict). */
  declare readonly [BUFFERS]: Map<string, boolean>;

  constructor() {
    // Not enumerable and symbol-keyed: invisible to discovery and to users' property names.
    Object.defineProperty(this, BUFFERS, { value: new Map<string, boolean>() });
  }

  // ---- Discovery ------------------------------------------------------------------------------

  /** The direct submodules with their property names (each module once). */
  namedChildren(): [string, Module][] {
    const seen = new Set<Module>();
    const out: [string, Module][] = [];
    for (const [k, v] of ownEntries(this)) {
      if (v instanceof Module && !seen.has(v)) {
        seen.add(v);
        out.push([k, v]);
      }
    }
    return out;
  }

  children(): Module[] {
    return this.namedChildren().map(([, m]) => m);
  }

  /** This module and every submodule, pre-order, each once: `['', self], ['fc1', ...], ...`. */
  namedModules(prefix = ""): [string, Module][] {
    const out: [string, Module][] = [];
    const seen = new Set<Module>();
    const walk = (m: Module, p: string): void => {
      if (seen.has(m)) return;
      seen.add(m);
      out.push([p, m]);
      for (const [k, c] of m.namedChildren()) walk(c, p ? `${p}.${k}` : k);
    };
    walk(this, prefix);
    return out;
  }

  modules(): Module[] {
    return this.namedModules().map(([, m]) => m);
  }

  /** Parameters by dotted name (`fc1.weight`), each Parameter once (tied weights once). */
  namedParameters(prefix = "", recurse = true): [string, Parameter][] {
    const mods: [string, Module][] = recurse ? this.namedModules(prefix) : [[prefix, this]];
    const seen = new Set<Parameter>();
    const out: [string, Parameter][] = [];
    for (const [p, m] of mods) {
      for (const [k, v] of ownParameters(m)) {
        if (seen.has(v)) continue;
        seen.add(v);
        out.push([p ? `${p}.${k}` : k, v]);
      }
    }
    return out;
  }

  parameters(recurse = true): Parameter[] {
    return this.namedParameters("", recurse).map(([, v]) => v);
  }

  /** Buffers by dotted name, persistent or not (BatchNorm's `running_mean`, ...). */
  namedBuffers(prefix = "", recurse = true): [string, Tensor][] {
    const mods: [string, Module][] = recurse ? this.namedModules(prefix) : [[prefix, this]];
    const out: [string, Tensor][] = [];
    for (const [p, m] of mods) {
      for (const [k, v] of ownBuffers(m, false)) out.push([p ? `${p}.${k}` : k, v]);
    }
    return out;
  }

  buffers(recurse = true): Tensor[] {
    return this.namedBuffers("", recurse).map(([, v]) => v);
  }

  /** The submodule at a dotted path (`layers.0.attn`); '' is this module. */
  getSubmodule(target: string): Module {
    if (target === "") return this;
    let m: Module = this;
    let path = "";
    for (const part of target.split(".")) {
      const next: unknown = (m as unknown as Record<string, unknown>)[part];
      path = path ? `${path}.${part}` : part;
      if (!(next instanceof Module) || !Object.hasOwn(m, part)) {
        throw new OpError(`${this.className()}.getSubmodule`, `no submodule '${path}'`);
      }
      m = next;
    }
    return m;
  }

  // ---- Registration ---------------------------------------------------------------------------

  /** Same as assigning `this[name] = param` (null leaves the slot empty, like `bias=False`). */
  registerParameter(name: string, param: Parameter | null): void {
    const n = checkName(
      this,
      "registerParameter",
      name,
      (v) => v === undefined || v === null || v instanceof Parameter,
    );
    if (this[BUFFERS].has(n)) {
      throw new OpError(`${this.className()}.registerParameter`, `'${n}' is a buffer`);
    }
    if (param !== null && !(param instanceof Parameter)) {
      throw new OpError(
        `${this.className()}.registerParameter`,
        `'${n}' must be a Parameter or null, got ${describe(param)} (wrap it: new Parameter(t))`,
      );
    }
    defineSlot(this, n, param);
  }

  /**
   * Marks a Tensor property as state (BatchNorm's running statistics). Persistent buffers are
   * in the state dict; others are not. null registers the name with no value.
   */
  registerBuffer(
    name: string,
    tensor: Tensor | null,
    options: { persistent?: boolean } = {},
  ): void {
    const n = checkName(
      this,
      "registerBuffer",
      name,
      (v) =>
        this[BUFFERS].has(name) ||
        v === undefined ||
        v === null ||
        (v instanceof Tensor && !(v instanceof Parameter)),
    );
    if (tensor !== null && !(tensor instanceof Tensor)) {
      throw new OpError(
        `${this.className()}.registerBuffer`,
        `'${n}' must be a Tensor or null, got ${describe(tensor)}`,
      );
    }
    this[BUFFERS].set(n, options.persistent ?? true);
    // A Parameter passed as a buffer is stored as a plain Tensor (buffers are not parameters).
    defineSlot(this, n, tensor instanceof Parameter ? new Tensor(tensor.impl) : tensor);
  }

  /** Same as assigning `this[name] = module`. */
  addModule(name: string, module: Module | null): void {
    const n = checkName(
      this,
      "addModule",
      name,
      (v) => v === undefined || v === null || v instanceof Module,
    );
    if (module !== null && !(module instanceof Module)) {
      throw new OpError(
        `${this.className()}.addModule`,
        `'${n}' must be a Module or null, got ${describe(module)}`,
      );
    }
    defineSlot(this, n, module);
  }

  /** PyTorch's alias of addModule. */
  registerModule(name: string, module: Module | null): void {
    this.addModule(name, module);
  }

  // ---- Modes, traversal, conversion ----------------------------------------------------------

  /** Sets training mode on this module and every submodule; returns this. */
  train(mode = true): this {
    if (typeof mode !== "boolean") {
      throw new OpError(`${this.className()}.train`, `mode must be true or false, got ${mode}`);
    }
    for (const m of this.modules()) m.training = mode;
    return this;
  }

  /** train(false). */
  eval(): this {
    return this.train(false);
  }

  /** Calls fn on every submodule (children first), then on this module; returns this. */
  apply(fn: (m: Module) => void): this {
    for (const c of this.children()) c.apply(fn);
    fn(this);
    return this;
  }

  /**
   * Converts every floating-point parameter and buffer to `dtype` (a floating dtype, as
   * PyTorch's Module.to); integer buffers such as num_batches_tracked keep their dtype.
   */
  to(dtype: DType): this {
    if (!isDType(dtype) || !isFloatingDType(dtype)) {
      throw new OpError(
        `${this.className()}.to`,
        `only floating point dtypes are accepted (float32, float16, bfloat16), got ` +
          `${isDType(dtype) ? dtype : `'${String(dtype)}' (dtypes: ${DTYPES.join(", ")})`}`,
      );
    }
    for (const m of this.modules()) {
      for (const [, p] of ownParameters(m)) {
        if (p.isFloatingPoint() && p.dtype !== dtype) p.impl = to(p, dtype).impl;
      }
      for (const [k, b] of ownBuffers(m, false)) {
        if (b.isFloatingPoint() && b.dtype !== dtype) defineSlot(m, k, to(b, dtype));
      }
    }
    return this;
  }

  // ---- State dict -----------------------------------------------------------------------------

  /**
   * The parameters and persistent buffers by PyTorch's key names (`fc1.weight`,
   * `bn.running_mean`, `layers.0.attn.q.bias`), as plain Tensors holding the current values
   * (a later load or `to` does not change a state dict already taken).
   */
  stateDict(prefix = ""): Record<string, Tensor> {
    const entries = collectSlots(this, prefix, new Set(), []).map(
      (s) => [s.key, new Tensor(s.value.impl)] as const,
    );
    return Object.fromEntries(entries);
  }

  /**
   * Loads values by key. Every value must be a Tensor of the same shape and dtype as the slot
   * it fills (an error names the key and both); with `strict` (the default, also passed as a
   * boolean) missing and unexpected keys are errors too. Everything is checked before anything
   * is assigned, so on any error the module is left unchanged. Parameters keep their identity.
   */
  loadStateDict(stateDict: StateDict, options: LoadOptions | boolean = {}): LoadResult {
    const strict = typeof options === "boolean" ? options : (options.strict ?? true);
    const given = new Map<string, unknown>(
      stateDict instanceof Map ? stateDict : Object.entries(stateDict),
    );
    const slots = collectSlots(this, "", new Set(), []);
    const expected = new Set(slots.map((s) => s.key));
    const problems: string[] = [];
    const missingKeys: string[] = [];
    const assign: [Slot, Tensor][] = [];
    for (const s of slots) {
      if (!given.has(s.key)) {
        if (!missingKeys.includes(s.key)) missingKeys.push(s.key);
        continue;
      }
      const v = given.get(s.key);
      if (!(v instanceof Tensor)) {
        problems.push(`${s.key}: expected a Tensor, got ${describe(v)}`);
      } else if (
        v.dtype !== s.value.dtype ||
        v.shape.length !== s.value.shape.length ||
        v.shape.some((d, i) => d !== s.value.shape[i])
      ) {
        problems.push(
          `${s.key}: the state dict has ${tensorDesc(v)}, the module's ${s.kind} is ` +
            `${tensorDesc(s.value)}` +
            (v.dtype !== s.value.dtype ? ` (convert with .to("${s.value.dtype}"))` : ""),
        );
      } else {
        assign.push([s, v]);
      }
    }
    const unexpectedKeys = [...given.keys()].filter((k) => !expected.has(k));
    const result = { missingKeys, unexpectedKeys };
    if (strict) {
      const list = (ks: string[]) => ks.map((k) => `"${k}"`).join(", ");
      if (missingKeys.length > 0) problems.unshift(`missing keys: ${list(missingKeys)}`);
      if (unexpectedKeys.length > 0) {
        const at = missingKeys.length > 0 ? 1 : 0;
        problems.splice(at, 0, `unexpected keys: ${list(unexpectedKeys)}`);
      }
    }
    if (problems.length > 0) throw new StateDictError(this.className(), problems, result);
    for (const [s, v] of assign) {
      if (s.kind === "parameter") s.value.impl = v.impl;
      else defineSlot(s.module, s.name, new Tensor(v.impl));
    }
    return result;
  }

  // ---- Calling and printing -------------------------------------------------------------------

  /** Runs `forward` (the one way callers and containers invoke a module). */
  call<T extends Forward>(this: T, ...args: Parameters<T["forward"]>): ReturnType<T["forward"]> {
    return callForward(this as unknown as Module, args) as ReturnType<T["forward"]>;
  }

  /** The class name PyTorch's repr starts with. */
  className(): string {
    return this.constructor.name;
  }

  /** The text between the parentheses of this module's repr line (`in_features=4, ...`). */
  extraRepr(): string {
    return "";
  }

  /** PyTorch's module repr: `MLP(\n  (fc1): Linear(in_features=4, ...)\n  ...\n)`. */
  toString(): string {
    const extra = this.extraRepr();
    const extraLines = extra ? extra.split("\n") : [];
    const childLines = ownEntries(this)
      .filter((e): e is [string, Module] => e[1] instanceof Module)
      .map(([k, m]) => `(${k}): ${addIndent(m.toString(), 2)}`);
    const lines = [...extraLines, ...childLines];
    let s = `${this.className()}(`;
    if (lines.length > 0) {
      s +=
        extraLines.length === 1 && childLines.length === 0
          ? extraLines[0]
          : `\n  ${lines.join("\n  ")}\n`;
    }
    return `${s})`;
  }

  // util.inspect.custom: a registered symbol, so no import of node:util (the browser build).
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

// ---- Discovery and slots: functions, so they take no names from subclasses -------------------

function ownEntries(m: Module): [string, unknown][] {
  const self = m as unknown as Record<string, unknown>;
  return Object.keys(self).map((k) => [k, self[k]]);
}

function ownParameters(m: Module): [string, Parameter][] {
  const out: [string, Parameter][] = [];
  for (const [k, v] of ownEntries(m)) {
    if (v instanceof Parameter && !m[BUFFERS].has(k)) out.push([k, v]);
  }
  return out;
}

function ownBuffers(m: Module, persistentOnly: boolean): [string, Tensor][] {
  const self = m as unknown as Record<string, unknown>;
  const out: [string, Tensor][] = [];
  for (const [k, persistent] of m[BUFFERS]) {
    const v = self[k];
    if (v instanceof Tensor && (persistent || !persistentOnly)) out.push([k, v]);
  }
  return out;
}

function checkName(
  m: Module,
  method: string,
  name: unknown,
  fits: (current: unknown) => boolean,
): string {
  const op = `${m.className()}.${method}`;
  if (typeof name !== "string" || name === "") {
    throw new OpError(op, `the name must be a non-empty string, got ${String(name)}`);
  }
  if (name.includes(".")) throw new OpError(op, `the name can't contain ".", got "${name}"`);
  if (name in m) {
    const current = (m as unknown as Record<string, unknown>)[name];
    if (!Object.hasOwn(m, name) || !fits(current)) {
      throw new OpError(op, `attribute '${name}' already exists`);
    }
  }
  return name;
}

function defineSlot(m: Module, name: string, value: unknown): void {
  Object.defineProperty(m, name, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** Every state-dict slot under `prefix`, recursing into children (shared ones at each path). */
function collectSlots(m: Module, prefix: string, ancestors: Set<Module>, out: Slot[]): Slot[] {
  if (ancestors.has(m)) {
    throw new OpError("stateDict", `module cycle: ${m.className()} at '${prefix}' contains itself`);
  }
  ancestors.add(m);
  const key = (k: string) => (prefix ? `${prefix}.${k}` : k);
  for (const [k, v] of ownParameters(m)) {
    out.push({ key: key(k), module: m, name: k, kind: "parameter", value: v });
  }
  for (const [k, v] of ownBuffers(m, true)) {
    out.push({ key: key(k), module: m, name: k, kind: "buffer", value: v });
  }
  for (const [k, c] of ownEntries(m)) {
    if (c instanceof Module) collectSlots(c, key(k), ancestors, out);
  }
  ancestors.delete(m);
  return out;
}

/** Modules whose activations are recomputed in backward (tensor/checkpoint.ts). */
export const checkpointed = new WeakSet<Module>();

type CheckpointRunner = (
  m: Module,
  args: readonly unknown[],
  run: (args: readonly unknown[]) => unknown,
) => unknown;

let checkpointRunner: CheckpointRunner | undefined;

/** Installs how a checkpointed module runs (tensor/checkpoint.ts, on import). */
export function setCheckpointRunner(r: CheckpointRunner): void {
  checkpointRunner = r;
}

/** Runs m.forward(...args), with a clear error for a module that has none. */
export function callForward(m: Module, args: readonly unknown[]): unknown {
  const f: unknown = (m as unknown as { forward?: unknown }).forward;
  if (typeof f !== "function") {
    throw new OpError(m.className(), `has no forward method to call`);
  }
  const run = (a: readonly unknown[]) =>
    runModuleCall(() => (f as (...x: unknown[]) => unknown).apply(m, [...a]));
  if (checkpointRunner !== undefined && checkpointed.has(m)) return checkpointRunner(m, args, run);
  return run(args);
}
