// Kiln's own code, as the source analysis sees it where no original file can be found (the
// browser build: no node:inspector to locate a function, no file system to read one). There
// the analysis reads `fn.toString()`, where every module-level name is unresolved, and
// compile() would have to read each such name as a free variable — which it cannot without an
// inspector, so it would fall back to replay mode for every model. Kiln's own classes' methods
// are marked here instead: their free variables are the library's imports and constants, which
// cannot change what a trace computes, so their analysis drops them (side effects, likely
// breaks and size branches are still read from the text). The claim is checked, not assumed:
// test/browser/library.test.ts runs the Node analysis (from the original files) on every
// function `libraryFunctions` lists and requires that none has a free variable to guard.

const marked = new WeakSet<Function>();

/**
 * Methods left out (`Class.method`): the Node analysis does not find them in their files (it
 * falls back to their text there too), so nothing checks the claim for them, and they are not
 * trusted — a model that calls them runs in replay mode in the browser. library.test.ts fails
 * when one of them becomes checkable, or another one stops being.
 */
export const UNCHECKED_METHODS: readonly string[] = [
  "MultiheadAttention.forward",
  "BatchNorm2d.updateRunningStats",
];

/**
 * The methods of every subclass of `base` (nn.Module) reachable from `namespaces` (their
 * values, one level of nested objects deep): own methods of each prototype up the chain to
 * `base`'s, exclusive (nn.Module's own methods read its module-level registries); getters,
 * setters and UNCHECKED_METHODS excluded. Class names are kept by the bundle (keepNames).
 */
export function libraryFunctions(
  base: Function,
  namespaces: readonly object[],
  /** Include UNCHECKED_METHODS too (for the test that keeps that list honest). */
  options: { unchecked?: boolean } = {},
): Function[] {
  const out = new Set<Function>();
  const seenProto = new Set<object>();
  const visitClass = (c: Function): void => {
    let proto = c.prototype as object | null;
    if (!(proto instanceof base)) return;
    while (proto !== null && proto !== base.prototype && !seenProto.has(proto)) {
      seenProto.add(proto);
      const owner = (proto as { constructor?: { name?: string } }).constructor?.name ?? "";
      for (const key of Object.getOwnPropertyNames(proto)) {
        if (key === "constructor") continue;
        if (!options.unchecked && UNCHECKED_METHODS.includes(`${owner}.${key}`)) continue;
        const d = Object.getOwnPropertyDescriptor(proto, key);
        if (d && typeof d.value === "function") out.add(d.value as Function);
      }
      proto = Object.getPrototypeOf(proto) as object | null;
    }
  };
  const isClass = (v: unknown): v is Function =>
    typeof v === "function" && /^class\b/.test(Function.prototype.toString.call(v));
  const visit = (ns: object, depth: number): void => {
    for (const v of Object.values(ns)) {
      if (isClass(v)) visitClass(v);
      else if (depth > 0 && typeof v === "object" && v !== null) visit(v, depth - 1);
    }
  };
  for (const ns of namespaces) visit(ns, 1);
  return [...out];
}

/** Marks the methods `libraryFunctions(namespaces)` lists as Kiln's own code. */
export function markLibraryCode(base: Function, namespaces: readonly object[]): void {
  for (const f of libraryFunctions(base, namespaces)) marked.add(f);
}

/** Whether `fn` was marked as Kiln's own code. */
export function isLibraryCode(fn: Function): boolean {
  return marked.has(fn);
}
