// Containers (PyTorch's torch/nn/modules/container.py): Sequential, ModuleList, ModuleDict.
// Their submodules are their own properties like any module's, under the keys PyTorch uses —
// "0", "1", ... for Sequential and ModuleList, the given names for ModuleDict and a named
// Sequential — so state-dict keys come out as `layers.0.attn.q.bias`, and indexing needs no
// Proxy: `layers[0]` is an ordinary property read (`get(i)` also takes negative indices).
// One difference from PyTorch: JS lists integer-like property names before other names, so a
// ModuleDict or named Sequential mixing keys like "1" and "fc" orders the integer ones first.

import { isOptionsObject } from "../args.ts";
import { OpError } from "../errors.ts";
import type { Tensor } from "../tensor.ts";
import { callForward, Module } from "./module.ts";

/** Own properties holding modules, in property order, repeats included. */
function moduleEntries(m: Module): [string, Module][] {
  const self = m as unknown as Record<string, unknown>;
  return Object.keys(self)
    .filter((k) => self[k] instanceof Module)
    .map((k) => [k, self[k] as Module]);
}

function indexOf(owner: Module, i: number, length: number, end = false): number {
  const n = end ? length + 1 : length;
  if (!Number.isInteger(i) || i < -n || i >= n) {
    throw new OpError(
      owner.className(),
      `index ${i} is out of range for ${length} module${length === 1 ? "" : "s"}`,
    );
  }
  return i < 0 ? i + length : i;
}

function checkModule(owner: Module, m: unknown, what: string): Module {
  if (!(m instanceof Module)) {
    throw new OpError(owner.className(), `${what} must be a Module, got ${String(m)}`);
  }
  return m;
}

/** A module whose forward maps a Tensor to a Tensor: what Sequential holds. */
export type TensorModule = Module & { forward(input: Tensor): Tensor };

/**
 * Runs its modules in order, each one's output the next one's input. `new Sequential(a, b, c)`
 * (keys "0", "1", "2") or `new Sequential({ fc: a, act: b })` (named keys).
 */
export class Sequential extends Module {
  [index: number]: TensorModule;

  constructor(...modules: Module[]);
  constructor(modules: Readonly<Record<string, Module>> | ReadonlyMap<string, Module>);
  constructor(...args: unknown[]) {
    super();
    const first = args[0];
    if (args.length === 1 && (first instanceof Map || isOptionsObject(first))) {
      const entries = first instanceof Map ? [...first] : Object.entries(first);
      for (const [k, m] of entries) this.addModule(String(k), checkModule(this, m, `'${k}'`));
    } else {
      args.forEach((m, i) => this.addModule(String(i), checkModule(this, m, `argument ${i}`)));
    }
  }

  get length(): number {
    return moduleEntries(this).length;
  }

  /** The module at position i (negative counts from the end), whatever its key. */
  get(i: number): TensorModule {
    const entries = moduleEntries(this);
    return entries[indexOf(this, i, entries.length)]![1] as TensorModule;
  }

  /** Adds a module at the end under the key String(length); returns this. */
  append(m: Module): this {
    this.addModule(String(this.length), checkModule(this, m, "the appended value"));
    return this;
  }

  *[Symbol.iterator](): IterableIterator<TensorModule> {
    for (const [, m] of moduleEntries(this)) yield m as TensorModule;
  }

  forward(input: Tensor): Tensor {
    let x: unknown = input;
    for (const [, m] of moduleEntries(this)) x = callForward(m, [x]);
    return x as Tensor;
  }
}

/**
 * A list of modules registered under "0", "1", ...: indexable (`list[0]`, `list.get(-1)`),
 * iterable, with `length`, `append`, `extend`, `insert`, `set`. It has no forward.
 */
export class ModuleList<M extends Module = Module> extends Module {
  [index: number]: M;

  constructor(modules: Iterable<M> = []) {
    super();
    this.extend(modules);
  }

  private items(): M[] {
    return moduleEntries(this).map(([, m]) => m as M);
  }

  private reset(items: readonly M[]): void {
    const self = this as unknown as Record<string, unknown>;
    for (const [k] of moduleEntries(this)) delete self[k];
    items.forEach((m, i) => this.addModule(String(i), m));
  }

  get length(): number {
    return moduleEntries(this).length;
  }

  get(i: number): M {
    const items = this.items();
    return items[indexOf(this, i, items.length)]!;
  }

  set(i: number, m: M): void {
    const items = this.items();
    items[indexOf(this, i, items.length)] = checkModule(this, m, "the value") as M;
    this.reset(items);
  }

  append(m: M): this {
    this.addModule(String(this.length), checkModule(this, m, "the appended value"));
    return this;
  }

  extend(modules: Iterable<M>): this {
    for (const m of modules) this.append(m);
    return this;
  }

  /** Inserts before position i (i = length appends). */
  insert(i: number, m: M): void {
    const items = this.items();
    items.splice(indexOf(this, i, items.length, true), 0, checkModule(this, m, "the value") as M);
    this.reset(items);
  }

  *[Symbol.iterator](): IterableIterator<M> {
    yield* this.items();
  }
}

/**
 * Modules by name: `get`, `set`, `has`, `delete`, `keys`, `values`, `entries`, `size`. Keys
 * are properties too (`dict.fc`), so they may not contain "." or shadow a method. Iterating
 * gives the keys, as in PyTorch.
 */
export class ModuleDict<M extends Module = Module> extends Module {
  constructor(
    modules: Readonly<Record<string, M>> | ReadonlyMap<string, M> | Iterable<[string, M]> = {},
  ) {
    super();
    const entries =
      modules instanceof Map || !isOptionsObject(modules)
        ? [...(modules as Iterable<[string, M]>)]
        : Object.entries(modules);
    for (const [k, m] of entries) this.set(k, m);
  }

  get size(): number {
    return moduleEntries(this).length;
  }

  has(key: string): boolean {
    return moduleEntries(this).some(([k]) => k === key);
  }

  get(key: string): M {
    const found = moduleEntries(this).find(([k]) => k === key);
    if (!found) throw new OpError(this.className(), `no module under the key '${key}'`);
    return found[1] as M;
  }

  set(key: string, m: M): void {
    this.addModule(key, checkModule(this, m, `'${key}'`));
  }

  /** Removes a key and returns its module (PyTorch's pop). */
  delete(key: string): M {
    const m = this.get(key);
    delete (this as unknown as Record<string, unknown>)[key];
    return m;
  }

  keys(): string[] {
    return moduleEntries(this).map(([k]) => k);
  }

  values(): M[] {
    return moduleEntries(this).map(([, m]) => m as M);
  }

  entries(): [string, M][] {
    return moduleEntries(this) as [string, M][];
  }

  *[Symbol.iterator](): IterableIterator<string> {
    yield* this.keys();
  }
}
