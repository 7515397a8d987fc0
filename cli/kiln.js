#!/usr/bin/env node
// The `kiln` launcher (package.json `bin`): registers tsx's loader for this process, so the CLI
// (cli/main.ts) and the user's model files (.ts or .js) load directly, with no build step and
// sharing one copy of Kiln's modules, then hands over to main.
import { register } from "tsx/esm/api";

// `kiln dump ... | head` closes the pipe early: that is the reader's choice, not an error.
process.stdout.on("error", (e) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});
register();
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
