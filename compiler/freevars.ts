// Reading a function's free variables (closure and module-level bindings) by NAME at call time,
// through node:inspector: Runtime.getProperties on the function gives its [[Scopes]], and each
// scope's properties are the variables it binds. The in-thread inspector Session answers
// synchronously (the callback runs inside `post`), so this works inside an ordinary call. It
// costs tens of microseconds per function (bench/guards.ts prints the figure), which is why
// compile() reads free variables only for functions whose analysis found some worth guarding
// (see compiler/compile.ts), and why values that are functions, classes or modules are not
// re-read (import bindings do not change). Primitive values come back as values; an object
// value is fetched by calling a function on it that stores it where this file can pick it up.

import { Session } from "node:inspector";

interface RemoteObject {
  type: string;
  subtype?: string;
  value?: unknown;
  unserializableValue?: string;
  objectId?: string;
  description?: string;
}

interface PropertyDescriptor {
  name: string;
  value?: RemoteObject;
}

interface InternalProperty {
  name: string;
  value?: RemoteObject;
}

interface GetPropertiesResult {
  result: PropertyDescriptor[];
  internalProperties?: InternalProperty[];
}

let session: Session | undefined;
const GROUP = "kiln-freevars";
const SLOT = "__kilnFreeVarSlot";

function connected(): Session {
  if (!session) {
    session = new Session();
    session.connect();
  }
  return session;
}

/** Sends one command and returns its result; the in-thread session answers synchronously. */
function post<T>(method: string, params: Record<string, unknown>): T {
  let out: T | undefined;
  let error: Error | null = null;
  let answered = false;
  connected().post(method, params, (err: Error | null, res: unknown) => {
    error = err;
    out = res as T;
    answered = true;
  });
  if (!answered) throw new Error(`inspector: ${method} did not answer synchronously`);
  if (error) throw new Error(`inspector: ${method} failed: ${(error as Error).message}`);
  return out as T;
}

function decode(r: RemoteObject): unknown {
  if (r.type === "undefined") return undefined;
  if (r.unserializableValue !== undefined) {
    const u = r.unserializableValue;
    if (u === "NaN") return NaN;
    if (u === "Infinity") return Infinity;
    if (u === "-Infinity") return -Infinity;
    if (u === "-0") return -0;
    if (u.endsWith("n")) return BigInt(u.slice(0, -1));
  }
  if (r.objectId === undefined) return r.value ?? (r.subtype === "null" ? null : undefined);
  post("Runtime.callFunctionOn", {
    objectId: r.objectId,
    functionDeclaration: `function () { globalThis.${SLOT} = this; }`,
    silent: true,
  });
  const g = globalThis as Record<string, unknown>;
  const v = g[SLOT];
  delete g[SLOT];
  return v;
}

/**
 * The current values of `names` as `fn` sees them (innermost scope first; the global scope is
 * skipped: globals are read as globalThis properties). A name no scope binds gives undefined
 * and is listed in `missing`.
 */
export function readFreeVariables(
  fn: (...args: never[]) => unknown,
  names: readonly string[],
): { values: unknown[]; missing: string[] } {
  const g = globalThis as Record<string, unknown>;
  g[SLOT] = fn;
  try {
    const target = post<{ result: RemoteObject }>("Runtime.evaluate", {
      expression: `globalThis.${SLOT}`,
      objectGroup: GROUP,
      silent: true,
    }).result;
    delete g[SLOT];
    const props = post<GetPropertiesResult>("Runtime.getProperties", {
      objectId: target.objectId,
      ownProperties: true,
    });
    const scopes = props.internalProperties?.find((p) => p.name === "[[Scopes]]")?.value;
    const want = new Map(names.map((n, i) => [n, i]));
    const values: unknown[] = names.map(() => undefined);
    const found = new Set<string>();
    if (scopes?.objectId !== undefined) {
      const list = post<GetPropertiesResult>("Runtime.getProperties", {
        objectId: scopes.objectId,
        ownProperties: true,
      }).result.filter((p) => /^\d+$/.test(p.name));
      for (const scope of list) {
        if (found.size === want.size) break;
        if (scope.value?.description === "Global" || scope.value?.objectId === undefined) continue;
        const vars = post<GetPropertiesResult>("Runtime.getProperties", {
          objectId: scope.value.objectId,
          ownProperties: true,
        }).result;
        for (const v of vars) {
          const i = want.get(v.name);
          if (i === undefined || found.has(v.name) || v.value === undefined) continue;
          found.add(v.name);
          values[i] = decode(v.value);
        }
      }
    }
    for (const [n, i] of want) {
      if (!found.has(n) && n in globalThis) {
        found.add(n);
        values[i] = g[n];
      }
    }
    return { values, missing: names.filter((n) => !found.has(n)) };
  } finally {
    delete g[SLOT];
    post("Runtime.releaseObjectGroup", { objectGroup: GROUP });
  }
}
