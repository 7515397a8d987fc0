// Where the pipeline's dumps (dumpDir, KILN_DUMP_DIR) are written: files in Node; the browser
// build swaps in dump_fs.browser.ts, which refuses with a clear error.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Writes `text` as `file` in `dir`, creating the directory. */
export function writeDumpFile(dir: string, file: string, text: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, file), text);
}
