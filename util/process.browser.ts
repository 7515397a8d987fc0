// The browser build's `process`: scripts/build_browser.ts injects it where Kiln's code names
// the global (`process.env["KILN_LOGS"]` and the like), so that code runs unchanged in a page.
// The environment is empty (every KILN_* setting at its default) unless the page fills
// `kilnEnv` before the first compile(); warnings and KILN_LOGS lines go to the console.
// compiler/node_builtins.ts reads `globalThis.process`, which this does not set, so the
// compiler still sees "not Node" and takes its browser paths.

/** The environment Kiln's settings are read from (KILN_LOGS, KILN_WASM, ...). */
export const kilnEnv: Record<string, string | undefined> = {};

export const process = {
  env: kilnEnv,
  emitWarning(message: string): void {
    console.warn(message);
  },
  once(): unknown {
    return process;
  },
  stderr: {
    write(text: string): boolean {
      console.log(text.endsWith("\n") ? text.slice(0, -1) : text);
      return true;
    },
  },
};
