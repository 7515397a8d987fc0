// The browser build's tensor/safetensors_fs.ts (scripts/build_browser.ts swaps it in): there is
// no file system, so a path is refused with a clear error; reading and writing bytes
// (readSafetensors(bytes), saveSafetensors) work as in Node.

import { SafetensorsError } from "./safetensors.ts";

export function readRegularFile(path: string): Uint8Array {
  throw new SafetensorsError(
    `safetensors '${path}': the browser build reads no files by path; pass the file's bytes ` +
      `(new Uint8Array(await (await fetch(url)).arrayBuffer()))`,
  );
}

export function writeFileBytes(path: string): void {
  throw new SafetensorsError(
    `safetensors '${path}': the browser build writes no files; use saveSafetensors(tensors), ` +
      `which returns the bytes`,
  );
}
