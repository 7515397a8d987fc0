// The browser build's stand-in for runtime/native/backend.ts (scripts/build_browser.ts swaps it
// in): the native backend compiles C with the machine's compiler and loads it as a Node addon,
// neither of which a browser has, so none of it is in the bundle. What compile() and explain()
// ask of it is answered here: it is not available, and a `threads` option runs the call as is
// (the option sizes the native pool only).

/** Why `native` cannot run here. */
export function nativeUnavailableReason(): string | undefined {
  return "the browser build has no native backend";
}

/** Runs `fn`: there is no native pool to size. */
export function withNativeThreads<T>(_n: number, fn: () => T): T {
  return fn();
}
