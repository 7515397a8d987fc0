#!/usr/bin/env node
// The `kiln` launcher (package.json `bin`). It registers tsx's loader for this process, so the
// user's model files (.ts or .js) load directly and share one copy of Kiln's modules with the
// CLI, then hands over to main. Installed, this file sits in dist/cli/ beside the compiled
// main.js (scripts/build.ts copies it there) and Kiln itself runs as plain JavaScript; in a
// checkout it sits beside main.ts and the CLI runs from the sources.
import { existsSync } from "node:fs";
import { register } from "tsx/esm/api";

// `kiln dump ... | head` closes the pipe early: that is the reader's choice, not an error.
process.stdout.on("error", (e) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});
register();
const built = new URL("./main.js", import.meta.url);
const { main } = await import(existsSync(built) ? built.href : "./main.ts");
process.exitCode = await main(process.argv.slice(2));
