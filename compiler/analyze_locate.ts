// Finding the ORIGINAL source of a live function object, for the source analysis
// (compiler/analyze.ts). `fn.toString()` is the JavaScript that actually runs — types stripped,
// often reformatted onto other lines by tsx/esbuild/vitest — so user-facing line numbers must
// come from elsewhere: V8 knows where each function starts in its script (the internal
// `[[FunctionLocation]]`, read through an in-process node:inspector session, whose calls
// complete synchronously), the Debugger domain names the script's URL and its
// `sourceMappingURL`, and the source map (node:module's SourceMap) maps the generated position
// back to the .ts file and, through `sourcesContent`, to the text that was actually loaded.
// Everything here fails soft: no inspector, an eval'd function or a missing file gives
// `undefined`, and the caller falls back to parsing `fn.toString()`.

import { readFileSync } from "node:fs";
import { Session } from "node:inspector";
import { findSourceMap, SourceMap, type SourceMapPayload } from "node:module";
import { fileURLToPath } from "node:url";

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

/** A script as the Debugger domain names it (also read by compiler/coverage.ts). */
export interface ScriptInfo {
  url: string;
  sourceMapURL: string | undefined;
}

let session: Session | undefined;
let sessionFailed = false;
const scripts = new Map<string, ScriptInfo>();
const sourceMaps = new Map<string, SourceMap | null>();
const GLOBAL_KEY = "__kilnAnalyzeLocateTarget";

function getSession(): Session | undefined {
  if (session || sessionFailed) return session;
  try {
    const s = new Session();
    s.connect();
    s.on("Debugger.scriptParsed", (m) => {
      scripts.set(m.params.scriptId, {
        url: m.params.url,
        sourceMapURL: m.params.sourceMapURL || undefined,
      });
    });
    session = s;
  } catch {
    // No inspector in this build of Node (or it is disabled): analysis uses fn.toString().
    sessionFailed = true;
  }
  return session;
}

/** V8's `[[FunctionLocation]]` of `fn`, or undefined (native, bound, no inspector). */
export function generatedLocation(fn: Function): GeneratedLocation | undefined {
  const s = getSession();
  if (!s) return undefined;
  const g = globalThis as Record<string, unknown>;
  g[GLOBAL_KEY] = fn;
  let location: GeneratedLocation | undefined;
  try {
    // The in-process session answers synchronously: each callback has run when post returns.
    s.post(
      "Runtime.evaluate",
      { expression: `globalThis.${GLOBAL_KEY}`, objectGroup: "kiln-analyze" },
      (err, res) => {
        const objectId = err ? undefined : res.result.objectId;
        if (!objectId) return;
        s.post("Runtime.getProperties", { objectId, ownProperties: true }, (err2, props) => {
          if (err2) return;
          for (const p of props.internalProperties ?? []) {
            if (p.name !== "[[FunctionLocation]]") continue;
            const v: unknown = p.value?.value;
            if (isRecord(v) && typeof v["scriptId"] === "string") {
              location = {
                scriptId: v["scriptId"],
                line: Number(v["lineNumber"]),
                column: Number(v["columnNumber"]),
              };
            }
          }
        });
      },
    );
    s.post("Runtime.releaseObjectGroup", { objectGroup: "kiln-analyze" });
  } finally {
    delete g[GLOBAL_KEY];
  }
  return location;
}

/**
 * The target of a bound function (`f.bind(obj)`), read through the inspector's
 * `[[TargetFunction]]`; undefined for any other function.
 */
export function boundTarget(fn: Function): Function | undefined {
  const s = getSession();
  if (!s || !fn.name.startsWith("bound ")) return undefined;
  const g = globalThis as Record<string, unknown>;
  g[GLOBAL_KEY] = fn;
  let target: unknown;
  try {
    s.post(
      "Runtime.evaluate",
      { expression: `globalThis.${GLOBAL_KEY}`, objectGroup: "kiln-analyze" },
      (err, res) => {
        const objectId = err ? undefined : res.result.objectId;
        if (!objectId) return;
        s.post("Runtime.getProperties", { objectId, ownProperties: true }, (err2, props) => {
          if (err2) return;
          const p = (props.internalProperties ?? []).find((q) => q.name === "[[TargetFunction]]");
          const targetId = p?.value?.objectId;
          if (!targetId) return;
          // Hand the object back to JavaScript: the function stores its `this` where we look.
          s.post("Runtime.callFunctionOn", {
            objectId: targetId,
            functionDeclaration: `function () { globalThis.${GLOBAL_KEY} = this; }`,
          });
          target = g[GLOBAL_KEY];
        });
      },
    );
    s.post("Runtime.releaseObjectGroup", { objectGroup: "kiln-analyze" });
  } finally {
    delete g[GLOBAL_KEY];
  }
  return typeof target === "function" && target !== fn ? target : undefined;
}

function scriptInfo(scriptId: string): ScriptInfo | undefined {
  const known = scripts.get(scriptId);
  if (known) return known;
  const s = getSession();
  if (!s) return undefined;
  // Enabling the Debugger domain replays scriptParsed for every loaded script (synchronously);
  // it is switched off again at once so the program does not run under an enabled debugger.
  s.post("Debugger.enable");
  s.post("Debugger.disable");
  return scripts.get(scriptId);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

export function urlToPath(url: string): string | undefined {
  if (url.startsWith("file://")) {
    try {
      return fileURLToPath(url);
    } catch {
      return undefined;
    }
  }
  return url.startsWith("/") ? url : undefined;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
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
  try {
    const ref = info.sourceMapURL;
    if (ref !== undefined) {
      let json: string | undefined;
      if (ref.startsWith("data:")) {
        const comma = ref.indexOf(",");
        const body = ref.slice(comma + 1);
        json = ref.slice(0, comma).endsWith(";base64")
          ? Buffer.from(body, "base64").toString("utf8")
          : decodeURIComponent(body);
      } else {
        const path = urlToPath(new URL(ref, info.url).href);
        json = path === undefined ? undefined : readText(path);
      }
      const payload: unknown = json === undefined ? undefined : JSON.parse(json);
      if (isPayload(payload)) map = new SourceMap(payload);
    } else {
      // Node's own loader keeps maps when source maps are enabled (--enable-source-maps).
      map = findSourceMap(info.url) ?? null;
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
      const base = payload.sourceRoot ? new URL(payload.sourceRoot, info.url).href : info.url;
      let file: string | undefined;
      try {
        file = urlToPath(new URL(source, base).href);
      } catch {
        file = undefined;
      }
      // The embedded text is what was loaded; the file on disk may have been edited since.
      const index = payload.sources.indexOf(source);
      const embedded = index >= 0 ? payload.sourcesContent?.[index] : undefined;
      const text = typeof embedded === "string" ? embedded : file && readText(file);
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
  const text = file === undefined ? undefined : readText(file);
  if (file === undefined || text === undefined) return undefined;
  return { file, text, line: gen.line + 1, column: gen.column + 1, via: "direct" };
}
