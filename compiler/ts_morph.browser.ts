// The browser build's compiler/ts_morph.ts: ts-morph (with its TypeScript) is part of the
// bundle, since compile() is synchronous and a browser has no `require` to load it later.

import * as tsMorph from "ts-morph";

/** The ts-morph module. */
export function loadTsMorph(): typeof tsMorph {
  return tsMorph;
}
