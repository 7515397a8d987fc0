// Finding the ORIGINAL source of a live function object, for the source analysis
// (compiler/analyze.ts). `fn.toString()` is the JavaScript that actually runs — types stripped,
// often reformatted onto other lines by tsx/esbuild/vitest — so user-facing line numbers must
// come from elsewhere: V8 knows where each function starts in its script (the internal
// `[[FunctionLocation]]`, read through the shared inspector session of compiler/inspector.ts,
// whose calls complete synchronously), the Debugger domain names the script's URL and its
// `sourceMappingURL`, and the source map (node:module's SourceMap) maps the generated position
// back to the .ts file and, through `sourcesContent`, to the text that was actually loaded.
// Everything here fails soft: no inspector (not Node), an eval'd function or a missing file
// gives `undefined`, and the caller falls back to parsing `fn.toString()`.

import type { SourceMap, SourceMapPayload } from "node:module";
import {
  localValue,
  properties,
  releaseGroup,
  remoteObject,
  type ScriptInfo,
  scriptInfo,
} from "./inspector.ts";
import { fileUrlToPath, nodeModule, readTextFile } from "./node_builtins.ts";

export type { ScriptInfo } from "./inspector.ts";

/** Where V8 says a function starts: 0-based line and column in its (generated) script. */
export interface GeneratedLocation {
  scriptId: string;
  line: number;
  column: number;
}

/** The original source of a function: its file, that file's text, and a 1-based position. */
export interface OriginalLocation {
  file: string;
  text: string;
  /** 1-based line of the function's start in `text` (approximate: the nearest mapping). */
  line: number;
  /** 1-based column. */
  column: number;
  /** How the position was obtained: through a source map, or as-is (plain JavaScript). */
  via: "source-map" | "direct";
}

const sourceMaps = new Map<string, SourceMap | null>();
const GROUP = "kiln-analyze";

/**
 * The internal properties of `fn` as the inspector sees them ([[FunctionLocation]],
 * [[TargetFunction]]), or undefined where there is no inspector; `read` runs before the
 * remote objects are released.
 */
function internals<T>(
  fn: Function,
  read: (props: NonNullable<ReturnType<typeof properties>["internalProperties"]>) => T,
): T | undefined {
  try {
    const objectId = remoteObject(fn, GROUP).objectId;
    if (!objectId) return undefined;
    return read(properties(objectId).internalProperties ?? []);
  } catch {
    // No inspector (or it refused): the analysis falls back to fn.toString().
    return undefined;
  } finally {
    try {
      releaseGroup(GROUP);
    } catch {
      // No session: nothing was made.
    }
  }
}

/** V8's `[[FunctionLocation]]` of `fn`, or undefined (native, bound, no inspector). */
export function generatedLocation(fn: Function): GeneratedLocation | undefined {
  return internals(fn, (props) => {
    const v: unknown = props.find((p) => p.name === "[[FunctionLocation]]")?.value?.value;
    if (!isRecord(v) || typeof v["scriptId"] !== "string") return undefined;
    return {
      scriptId: v["scriptId"],
      line: Number(v["lineNumber"]),
      column: Number(v["columnNumber"]),
    };
  });
}

/**
 * The target of a bound function (`f.bind(obj)`), read through the inspector's
 * `[[TargetFunction]]`; undefined for any other function.
 */
export function boundTarget(fn: Function): Function | undefined {
  if (!fn.name.startsWith("bound ")) return undefined;
  const target = internals(fn, (props) => {
    const id = props.find((q) => q.name === "[[TargetFunction]]")?.value?.objectId;
    return id === undefined ? undefined : localValue(id);
  });
  return typeof target === "function" && target !== fn ? target : undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

export function urlToPath(url: string): string | undefined {
  if (url.startsWith("file://")) {
    try {
      return fileUrlToPath(url);
    } catch {
      return undefined;
    }
  }
  return url.startsWith("/") ? url : undefined;
}

/** The files a source map's sources resolve to (undefined where one is not a file URL). */
export function mapSourceFiles(map: SourceMap, info: ScriptInfo): (string | undefined)[] {
  return map.payload.sources.map((source) => sourceFile(map, info, source));
}

/** The file a source of script `info`'s map names (its sourceRoot, then the script's URL). */
function sourceFile(map: SourceMap, info: ScriptInfo, source: string): string | undefined {
  const root = map.payload.sourceRoot;
  const base = root ? safeUrl(root, info.url) : info.url;
  const u = base === undefined ? undefined : safeUrl(source, base);
  return u === undefined ? undefined : urlToPath(u);
}

function safeUrl(ref: string, base: string): string | undefined {
  try {
    return new URL(ref, base).href;
  } catch {
    return undefined;
  }
}

/** Base64 text (Buffer's lenient decoding where there is one, as Node reads maps). */
function decodeBase64(body: string): string {
  const B = (globalThis as { Buffer?: typeof Buffer }).Buffer;
  if (B) return B.from(body, "base64").toString("utf8");
  return new TextDecoder().decode(Uint8Array.from(atob(body), (c) => c.charCodeAt(0)));
}

function isPayload(v: unknown): v is SourceMapPayload {
  return isRecord(v) && Array.isArray(v["sources"]) && typeof v["mappings"] === "string";
}

/** The source map of a script (inline, beside it, or Node's own), cached; undefined if none. */
export function loadSourceMap(info: ScriptInfo): SourceMap | undefined {
  const key = `${info.url}\n${info.sourceMapURL ?? ""}`;
  const cached = sourceMaps.get(key);
  if (cached !== undefined) return cached ?? undefined;
  let map: SourceMap | null = null;
  const nodeModules = nodeModule("node:module");
  try {
    if (!nodeModules) throw new Error("no source maps here");
    const ref = info.sourceMapURL;
    if (ref !== undefined) {
      let json: string | undefined;
      if (ref.startsWith("data:")) {
        const comma = ref.indexOf(",");
        const body = ref.slice(comma + 1);
        json = ref.slice(0, comma).endsWith(";base64")
          ? decodeBase64(body)
          : decodeURIComponent(body);
      } else {
        const path = urlToPath(new URL(ref, info.url).href);
        json = path === undefined ? undefined : readTextFile(path);
      }
      const payload: unknown = json === undefined ? undefined : JSON.parse(json);
      if (isPayload(payload)) map = new nodeModules.SourceMap(payload);
    } else {
      // Node's own loader keeps maps when source maps are enabled (--enable-source-maps).
      map = nodeModules.findSourceMap(info.url) ?? null;
    }
  } catch {
    map = null;
  }
  sourceMaps.set(key, map);
  return map ?? undefined;
}

/**
 * The original file, text and 1-based position where `fn` is defined, or undefined when it
 * cannot be found (native or bound functions, eval'd code, no inspector, a missing file).
 */
export function locateOriginal(fn: Function): OriginalLocation | undefined {
  const gen = generatedLocation(fn);
  if (!gen) return undefined;
  const info = scriptInfo(gen.scriptId);
  if (!info || info.url === "") return undefined;
  const map = loadSourceMap(info);
  if (map) {
    const entry: unknown = map.findEntry(gen.line, gen.column);
    if (isRecord(entry) && typeof entry["originalSource"] === "string") {
      const source = entry["originalSource"];
      const payload = map.payload;
      const file = sourceFile(map, info, source);
      // The embedded text is what was loaded; the file on disk may have been edited since.
      const index = payload.sources.indexOf(source);
      const embedded = index >= 0 ? payload.sourcesContent?.[index] : undefined;
      const text = typeof embedded === "string" ? embedded : file && readTextFile(file);
      if (file !== undefined && typeof text === "string") {
        return {
          file,
          text,
          line: Number(entry["originalLine"]) + 1,
          column: Number(entry["originalColumn"]) + 1,
          via: "source-map",
        };
      }
    }
  }
  const file = urlToPath(info.url);
  const text = file === undefined ? undefined : readTextFile(file);
  if (file === undefined || text === undefined) return undefined;
  return { file, text, line: gen.line + 1, column: gen.column + 1, via: "direct" };
}
