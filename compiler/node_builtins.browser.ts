// The browser build's compiler/node_builtins.ts: there are no Node built-ins, so every caller
// takes its fallback (the static size-branch oracle, the analysis of `fn.toString()`, no
// original source files) — what node_builtins.ts answers anywhere `process` is not Node's.

import type { NodeBuiltins } from "./node_builtins.ts";

/** Always undefined: no Node built-in here. */
export function nodeModule<K extends keyof NodeBuiltins>(_name: K): NodeBuiltins[K] | undefined {
  return undefined;
}

/** A `file:` URL as a path. */
export function fileUrlToPath(url: string): string {
  return decodeURIComponent(new URL(url).pathname);
}

/** No file system: undefined. */
export function readTextFile(_path: string): string | undefined {
  return undefined;
}
