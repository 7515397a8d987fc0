// How the source analysis gets ts-morph (and the TypeScript it bundles). In Node it is loaded
// on first use through a `require` (a quarter of a second; programs that never call compile()
// never pay for it, and the analysis normally runs in a worker thread: analyze_host.ts). The
// browser build swaps in ts_morph.browser.ts, which imports it statically into the bundle.

import { nodeModule } from "./node_builtins.ts";

type TsMorph = typeof import("ts-morph");

let tsMorph: TsMorph | undefined;

/** The ts-morph module, loaded on first use (throws where there is no `require`: not Node). */
export function loadTsMorph(): TsMorph {
  if (tsMorph) return tsMorph;
  const m = nodeModule("node:module");
  if (!m) throw new Error("ts-morph cannot be loaded here (no node:module)");
  tsMorph = m.createRequire(import.meta.url)("ts-morph") as TsMorph;
  return tsMorph;
}
