// The browser build's pool_node.ts (scripts/build_browser.ts swaps it in): a browser has no
// node:worker_threads, and the Node host's worker prelude (a string that requires it) must not
// be in the bundle. The page supplies its own host through setWasmThreadHost; until then the
// wasm backend runs single-threaded.

import type { WasmThreadHost } from "./threads.ts";

/** No Node host in a browser. */
export function nodeThreadHost(): WasmThreadHost | undefined {
  return undefined;
}
