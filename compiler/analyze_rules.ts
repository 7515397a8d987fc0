// The tables behind the source analysis (compiler/analyze.ts): which names are JavaScript
// globals rather than free variables, which calls are side effects (printing, randomness,
// clocks, I/O, timers) and why, which methods mutate their receiver, which Tensor methods read
// values (graph breaks), and which properties of a Tensor are static metadata. Kept apart so a
// new rule is one line in one table, and so the analysis code reads as the walk it is.

/** Side-effect categories, so compile() can treat printing differently from I/O. */
export type SideEffectKind =
  | "print"
  | "random"
  | "clock"
  | "io"
  | "process"
  | "timer"
  | "async"
  | "mutation"
  | "assignment";

export interface CallRule {
  kind: SideEffectKind;
  reason: string;
}

/**
 * ECMAScript and Node globals. A reference to one of these is not a free variable (its value is
 * not the user's state); calls on some of them are side effects (GLOBAL_CALLS below).
 */
export const GLOBAL_NAMES: ReadonlySet<string> = new Set([
  // ECMAScript value properties and functions
  "globalThis", "undefined", "NaN", "Infinity", "eval", "isFinite", "isNaN", "parseFloat",
  "parseInt", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape",
  "unescape", "arguments",
  // ECMAScript constructors and namespaces
  "Object", "Function", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Math",
  "JSON", "Reflect", "Proxy", "Promise", "Date", "RegExp", "Error", "TypeError", "RangeError",
  "SyntaxError", "ReferenceError", "EvalError", "URIError", "AggregateError", "Map", "Set",
  "WeakMap", "WeakSet", "WeakRef", "FinalizationRegistry", "ArrayBuffer", "SharedArrayBuffer",
  "DataView", "Atomics", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
  "Uint16Array", "Int32Array", "Uint32Array", "Float32Array", "Float64Array", "BigInt64Array",
  "BigUint64Array", "Intl", "Iterator",
  // Host (Node and web) globals
  "console", "process", "Buffer", "require", "module", "exports", "__dirname", "__filename",
  "setTimeout", "clearTimeout", "setInterval", "clearInterval", "setImmediate",
  "clearImmediate", "queueMicrotask", "structuredClone", "fetch", "performance", "crypto",
  "URL", "URLSearchParams", "TextEncoder", "TextDecoder", "AbortController", "AbortSignal",
  "Event", "EventTarget", "Blob", "atob", "btoa", "WebAssembly", "navigator", "global",
  "MessageChannel", "MessagePort", "BroadcastChannel", "Headers", "Request", "Response",
  "FormData", "WebSocket", "XMLHttpRequest", "alert", "window", "self", "document",
]);

/** Calls on globals that are side effects, keyed by the dotted callee (`*` = any member). */
export const GLOBAL_CALLS: ReadonlyMap<string, CallRule> = new Map<string, CallRule>([
  ["console.*", { kind: "print", reason: "prints to the console (runs on every call)" }],
  ["Math.random", { kind: "random", reason: "nondeterministic: a new random number per call" }],
  ["crypto.*", { kind: "random", reason: "nondeterministic: reads the crypto RNG" }],
  ["Date.now", { kind: "clock", reason: "reads the clock (a different value per call)" }],
  ["Date", { kind: "clock", reason: "reads the clock (a different value per call)" }],
  ["performance.now", { kind: "clock", reason: "reads the clock (a different value per call)" }],
  ["process.*", { kind: "process", reason: "touches the process (I/O or process state)" }],
  ["fetch", { kind: "io", reason: "network I/O" }],
  ["require", { kind: "io", reason: "loads a module at run time" }],
  ["setTimeout", { kind: "timer", reason: "schedules work outside the traced call" }],
  ["setInterval", { kind: "timer", reason: "schedules work outside the traced call" }],
  ["setImmediate", { kind: "timer", reason: "schedules work outside the traced call" }],
  ["queueMicrotask", { kind: "timer", reason: "schedules work outside the traced call" }],
  ["alert", { kind: "io", reason: "user interface I/O" }],
]);

/** Node modules whose every call is a side effect, with the category and reason. */
export const SIDE_EFFECT_MODULES: ReadonlyMap<string, CallRule> = new Map<string, CallRule>(
  (
    [
      ["fs", "io", "file system I/O"],
      ["fs/promises", "io", "file system I/O"],
      ["net", "io", "network I/O"],
      ["http", "io", "network I/O"],
      ["https", "io", "network I/O"],
      ["http2", "io", "network I/O"],
      ["dgram", "io", "network I/O"],
      ["dns", "io", "network I/O"],
      ["tls", "io", "network I/O"],
      ["child_process", "io", "starts processes"],
      ["worker_threads", "io", "talks to worker threads"],
      ["readline", "io", "terminal I/O"],
      ["os", "io", "reads the operating system"],
      ["process", "process", "touches the process (I/O or process state)"],
      ["crypto", "random", "nondeterministic: reads the crypto RNG"],
      ["perf_hooks", "clock", "reads the clock (a different value per call)"],
      ["timers", "timer", "schedules work outside the traced call"],
      ["timers/promises", "timer", "schedules work outside the traced call"],
    ] as const
  ).flatMap(([name, kind, reason]) => [
    [name, { kind, reason }],
    [`node:${name}`, { kind, reason }],
  ]),
);

/**
 * Methods that mutate their receiver whatever it is (Array-only names: Tensor has none of
 * them, and Tensors are immutable). A call on a non-local receiver is a side effect.
 */
export const MUTATING_METHODS: ReadonlySet<string> = new Set([
  "push", "pop", "shift", "unshift", "splice", "copyWithin", "fill", "reverse", "set",
  "delete", "clear",
]);

/**
 * Mutating methods whose name a Tensor method shares (`t.add(u)`, `t.sort()` return new
 * tensors): a side effect only when the receiver is declared as an Array, Set or Map.
 */
export const AMBIGUOUS_MUTATING_METHODS: ReadonlySet<string> = new Set(["add", "sort"]);

/** Global functions that mutate their first argument. */
export const MUTATING_GLOBAL_FUNCTIONS: ReadonlySet<string> = new Set([
  "Object.assign", "Object.defineProperty", "Object.defineProperties", "Object.setPrototypeOf",
  "Reflect.set", "Reflect.defineProperty", "Reflect.deleteProperty", "Reflect.setPrototypeOf",
]);

/** Tensor methods that read the values: a graph break when compiled. */
export const VALUE_READ_METHODS: ReadonlyMap<string, string> = new Map([
  ["item", "item() reads a tensor's value into JavaScript: a graph break"],
  ["toArray", "toArray() reads a tensor's values into JavaScript: a graph break"],
  ["data", "data() reads a tensor's values into JavaScript: a graph break"],
  ["toBytes", "toBytes() reads a tensor's values into JavaScript: a graph break"],
]);

/** Tensor members whose result is not a tensor (static metadata or JS values). */
export const NON_TENSOR_MEMBERS: ReadonlySet<string> = new Set([
  "shape", "dtype", "ndim", "length", "numel", "dim", "size", "isFloatingPoint", "item",
  "toArray", "data", "toBytes", "toString", "requiresGrad", "split", "chunk", "impl",
  "realize", "reader",
]);

/**
 * Global functions that turn their argument into a JavaScript value: given a tensor, they read
 * its value (through Symbol.toPrimitive or toString).
 */
export const COERCING_FUNCTIONS: ReadonlySet<string> = new Set([
  "Number", "String", "parseFloat", "parseInt", "BigInt", "isNaN", "isFinite", "JSON.stringify",
  "Math.*",
]);

/** Names of Kiln exports that are not tensor-valued functions (the rest return tensors). */
export const KILN_NON_TENSOR_FUNCTIONS: ReadonlySet<string> = new Set([
  "manualSeed", "isDType", "isFloatingDType", "isIntegralDType", "promoteTypes", "resultType",
  "setLazy", "lazy", "shapeToString", "shapesEqual", "compile", "printHlo", "parseHlo",
  "fingerprint", "verifyModule", "evaluate", "arrayShape", "scalarShape", "tupleShape",
]);

/** Top-level folders (and files) of the Kiln repository that make up its API. */
export const KILN_API_ROOTS: ReadonlySet<string> = new Set([
  "index.ts", "tensor", "ir", "compiler", "runtime", "passes", "util",
]);

/** Package names under which Kiln itself is imported. */
export const KILN_PACKAGE_NAMES: ReadonlySet<string> = new Set(["kiln"]);
