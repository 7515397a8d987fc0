// What every model file shares for the model-file contract (models/README.md): resolving a
// config given by name, and reading an input size spec such as `{ batch: 2, seq: 77 }` with
// the model's defaults filled in and anything unknown or malformed rejected by name.

import { closest } from "../util/suggest.ts";

/** A config by name ("tiny", "full") or the config object itself. */
export type ConfigChoice<C, N extends string> = C | N;

/** The config object for a name (or the object passed); an unknown name lists the known ones. */
export function resolveConfig<C extends object, N extends string>(
  model: string,
  configs: Readonly<Record<N, C>>,
  choice: ConfigChoice<C, N>,
): C {
  if (typeof choice !== "string") return choice;
  if (!Object.hasOwn(configs, choice)) {
    throw new Error(
      `${model}: unknown config '${choice}' (configs: ${Object.keys(configs).join(", ")})`,
    );
  }
  return configs[choice];
}

/**
 * The size spec with defaults filled in. Every size must be a positive integer and a key the
 * model knows; the error names the model, the key and the accepted keys.
 */
export function readSpec<K extends string>(
  model: string,
  spec: Readonly<Record<string, number>>,
  defaults: Readonly<Record<K, number>>,
): Record<K, number> {
  const known = Object.keys(defaults);
  const out: Record<string, number> = { ...defaults };
  for (const [k, v] of Object.entries(spec)) {
    if (!known.includes(k)) {
      const near = closest(k, known);
      throw new Error(
        `${model} inputs: unknown size '${k}'${near ? `; did you mean '${near}'?` : ""} ` +
          `(sizes: ${known.join(", ")})`,
      );
    }
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
      throw new Error(`${model} inputs: '${k}' must be a positive integer, got ${String(v)}`);
    }
    out[k] = v;
  }
  return out as Record<K, number>;
}
