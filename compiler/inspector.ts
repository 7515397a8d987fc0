// The ONE in-thread node:inspector session compiler/ talks to V8 through (Node only; loaded
// lazily through compiler/node_builtins.ts): the source analysis asks it where a function is
// (analyze_locate.ts), compile() reads free variables through it (freevars.ts), and the
// size-branch oracle records block coverage with it (coverage.ts). One session means one
// `scriptParsed` registry and one owner of the Debugger domain, which matters because of a V8
// fact: when the Debugger domain goes off in the last session that had it on, V8 drops every
// block counter, and with them a coverage recording in progress. So the domain is turned on
// only around the commands that need it (`withDebugger`) and, while a recording holds the
// counters (`holdBlockCounters`), turning it off again waits for the recording to end: no
// stage of compile() can wipe another's counters. (A user's own session still can; coverage.ts
// detects that with a canary.) The in-thread session answers inside `post`, so every call here
// is synchronous, as compile() is.

import type { Session } from "node:inspector";
import { nodeModule } from "./node_builtins.ts";

/** A script as the Debugger domain names it. */
export interface ScriptInfo {
  url: string;
  sourceMapURL: string | undefined;
}

/** A value on V8's side (Runtime.RemoteObject, the fields compiler/ reads). */
export interface RemoteObject {
  type: string;
  subtype?: string;
  value?: unknown;
  unserializableValue?: string;
  objectId?: string;
  description?: string;
}

/** Runtime.getProperties' answer (own and internal properties). */
export interface Properties {
  result: { name: string; value?: RemoteObject }[];
  internalProperties?: { name: string; value?: RemoteObject }[];
}

let session: Session | undefined;
let failure: string | undefined;
const scripts = new Map<string, ScriptInfo>();

function connected(): Session | undefined {
  if (session || failure !== undefined) return session;
  const inspector = nodeModule("node:inspector");
  if (!inspector) {
    failure = "node:inspector is not available here";
    return undefined;
  }
  try {
    const s = new inspector.Session();
    s.connect();
    s.on("Debugger.scriptParsed", (m) => {
      scripts.set(m.params.scriptId, {
        url: m.params.url,
        sourceMapURL: m.params.sourceMapURL || undefined,
      });
    });
    session = s;
  } catch (e) {
    failure = e instanceof Error ? e.message : String(e);
  }
  return session;
}

/** Why there is no session (connecting on the first ask), or undefined when there is one. */
export function inspectorUnavailable(): string | undefined {
  return connected() ? undefined : failure;
}

/** Whether an inspector server is open (`node --inspect`): a debugger may be attached. */
export function inspectorServerOpen(): boolean {
  return nodeModule("node:inspector")?.url() !== undefined;
}

/** One command and its result; throws when there is no session or the command fails. */
export function post<T>(method: string, params: Record<string, unknown> = {}): T {
  const s = connected();
  if (!s) throw new Error(`inspector: ${failure ?? "no session"}`);
  let out: unknown;
  let error: Error | null = null;
  let answered = false;
  s.post(method, params, (err: Error | null, res: unknown) => {
    error = err;
    out = res;
    answered = true;
  });
  if (!answered) throw new Error(`inspector: ${method} did not answer synchronously`);
  if (error) throw new Error(`inspector: ${method} failed: ${(error as Error).message}`);
  return out as T;
}

// ---- the Debugger domain ---------------------------------------------------------------------

let debuggerOn = false;
let debuggerUsers = 0;
let counterHolds = 0;

/**
 * Runs `f` with the Debugger domain on (turning it on replays `scriptParsed` for every loaded
 * script, synchronously, and allows Debugger.getScriptSource). It is turned off again when no
 * one needs it — after `f`, or, while a recording holds the block counters, when that ends —
 * so user code does not run under an enabled debugger longer than needed.
 */
export function withDebugger<T>(f: () => T): T {
  if (!debuggerOn) {
    post("Debugger.enable");
    debuggerOn = true;
  }
  debuggerUsers++;
  try {
    return f();
  } finally {
    debuggerUsers--;
    settleDebugger();
  }
}

/** Keeps V8's block counters alive (see the file comment) until the returned release runs. */
export function holdBlockCounters(): () => void {
  counterHolds++;
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    counterHolds--;
    settleDebugger();
  };
}

/** Whether this session has the Debugger domain on now (for tests). */
export function debuggerIsOn(): boolean {
  return debuggerOn;
}

function settleDebugger(): void {
  if (!debuggerOn || debuggerUsers > 0 || counterHolds > 0) return;
  debuggerOn = false;
  try {
    post("Debugger.disable");
  } catch {
    // The session is gone: the domain is off with it.
  }
}

/** What the Debugger domain said about a script; replays the registry once when unknown. */
export function scriptInfo(scriptId: string): ScriptInfo | undefined {
  const known = scripts.get(scriptId);
  if (known || !connected()) return known;
  try {
    withDebugger(() => undefined);
  } catch {
    return undefined;
  }
  return scripts.get(scriptId);
}

/** A script already in the registry (no replay). */
export function knownScript(scriptId: string): ScriptInfo | undefined {
  return scripts.get(scriptId);
}

// ---- values across the session ---------------------------------------------------------------

/** Where a value waits while it crosses between JavaScript and the session. */
const SLOT = "__kilnInspectorSlot";

/** `value` as a remote object in `group` (release the group when done). */
export function remoteObject(value: unknown, group: string): RemoteObject {
  const g = globalThis as Record<string, unknown>;
  g[SLOT] = value;
  try {
    return post<{ result: RemoteObject }>("Runtime.evaluate", {
      expression: `globalThis.${SLOT}`,
      objectGroup: group,
      silent: true,
    }).result;
  } finally {
    delete g[SLOT];
  }
}

/** The JavaScript value behind a remote object: a function stores its `this` where we look. */
export function localValue(objectId: string): unknown {
  const g = globalThis as Record<string, unknown>;
  try {
    post("Runtime.callFunctionOn", {
      objectId,
      functionDeclaration: `function () { globalThis.${SLOT} = this; }`,
      silent: true,
    });
    return g[SLOT];
  } finally {
    delete g[SLOT];
  }
}

/** A remote object's own properties, with its internal ones ([[Scopes]], [[FunctionLocation]]). */
export function properties(objectId: string): Properties {
  return post<Properties>("Runtime.getProperties", { objectId, ownProperties: true });
}

/** Frees the remote objects of `group`. */
export function releaseGroup(group: string): void {
  post("Runtime.releaseObjectGroup", { objectGroup: group });
}
