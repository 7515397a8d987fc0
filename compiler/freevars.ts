// Reading a function's free variables (closure and module-level bindings) by NAME at call time,
// through the shared inspector session (compiler/inspector.ts; Node only): Runtime.getProperties
// on the function gives its [[Scopes]], and each scope's properties are the variables it binds.
// The in-thread session answers synchronously, so this works inside an ordinary call. It costs
// tens of microseconds per function (bench/guards.ts prints the figure), which is why compile()
// reads free variables only for functions whose analysis found some worth guarding (see
// compiler/target.ts), and why values that are functions, classes or modules are not re-read
// (import bindings do not change). Primitive values come back as values; an object value is
// fetched back from the session (inspector.ts's localValue). Only the Runtime domain is used,
// so reading never disturbs a coverage recording.

import {
  localValue,
  properties,
  type RemoteObject,
  releaseGroup,
  remoteObject,
} from "./inspector.ts";

const GROUP = "kiln-freevars";

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
  return localValue(r.objectId);
}

/**
 * The current values of `names` as `fn` sees them (innermost scope first; the global scope is
 * skipped: globals are read as globalThis properties). A name no scope binds gives undefined
 * and is listed in `missing`. Throws where there is no inspector.
 */
export function readFreeVariables(
  fn: (...args: never[]) => unknown,
  names: readonly string[],
): { values: unknown[]; missing: string[] } {
  const g = globalThis as Record<string, unknown>;
  try {
    const target = remoteObject(fn, GROUP);
    const scopes = properties(target.objectId!).internalProperties?.find(
      (p) => p.name === "[[Scopes]]",
    )?.value;
    const want = new Map(names.map((n, i) => [n, i]));
    const values: unknown[] = names.map(() => undefined);
    const found = new Set<string>();
    if (scopes?.objectId !== undefined) {
      const list = properties(scopes.objectId).result.filter((p) => /^\d+$/.test(p.name));
      for (const scope of list) {
        if (found.size === want.size) break;
        if (scope.value?.description === "Global" || scope.value?.objectId === undefined) continue;
        for (const v of properties(scope.value.objectId).result) {
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
    releaseGroup(GROUP);
  }
}
