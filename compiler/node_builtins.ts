// The one door from compiler/ to Node's built-in modules. compile() is synchronous, so a
// built-in is loaded synchronously, on first use, through `process.getBuiltinModule` (Node
// 20.16 and later, Deno and Bun) or, on an older Node 20, through a `require` made once by
// `module.createRequire` at load; anywhere else (a browser) `nodeModule` answers undefined and
// each caller takes its fallback: no inspector means the static size-branch oracle and a
// source analysis of `fn.toString()`, no file system means no original source. Nothing in
// compiler/ imports a `node:` module by name outside this file, so loading the compiler
// never fails for want of one.

/** The built-ins compiler/ uses, by the name it asks for. */
export interface NodeBuiltins {
  "node:fs": typeof import("node:fs");
  "node:inspector": typeof import("node:inspector");
  "node:module": typeof import("node:module");
  "node:os": typeof import("node:os");
  "node:path": typeof import("node:path");
  "node:url": typeof import("node:url");
  "node:vm": typeof import("node:vm");
  "node:worker_threads": typeof import("node:worker_threads");
}

type Loader = (id: string) => unknown;

interface MaybeNodeProcess {
  getBuiltinModule?: Loader;
  versions?: { node?: string };
}

const proc = (globalThis as { process?: MaybeNodeProcess }).process;

/**
 * Node before 20.16 has no getBuiltinModule: a `require` is made once, here, while the module
 * loads (a dynamic import is the only way to reach node:module without naming it statically,
 * and it is awaited only on such a Node).
 */
const legacyRequire: Loader | undefined =
  typeof proc?.getBuiltinModule === "function" || proc?.versions?.node === undefined
    ? undefined
    : await import("node:module").then(
        (m) => m.createRequire(import.meta.url) as Loader,
        () => undefined,
      );

const loaded = new Map<string, unknown>();

/** A Node built-in, loaded on first use; undefined where there is none (see the file comment). */
export function nodeModule<K extends keyof NodeBuiltins>(name: K): NodeBuiltins[K] | undefined {
  if (loaded.has(name)) return loaded.get(name) as NodeBuiltins[K] | undefined;
  let m: unknown;
  try {
    m = proc?.getBuiltinModule ? proc.getBuiltinModule(name) : legacyRequire?.(name);
  } catch {
    m = undefined;
  }
  loaded.set(name, m ?? undefined);
  return m as NodeBuiltins[K] | undefined;
}

/** A `file:` URL as a path (Node's own conversion when there is one: Windows drive letters). */
export function fileUrlToPath(url: string): string {
  const u = nodeModule("node:url");
  return u ? u.fileURLToPath(url) : decodeURIComponent(new URL(url).pathname);
}

/** A file's text, or undefined (unreadable, or no file system here). */
export function readTextFile(path: string): string | undefined {
  try {
    return nodeModule("node:fs")?.readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}
