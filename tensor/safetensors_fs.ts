// The file half of tensor/safetensors.ts (Node): reading a weights file by path and writing one.
// The browser build swaps in safetensors_fs.browser.ts, which refuses paths with a clear error
// (pass the file's bytes instead).

import { closeSync, fstatSync, openSync, readSync, writeFileSync } from "node:fs";
import { MAX_FILE, SafetensorsError } from "./safetensors.ts";

/**
 * A file's bytes, read only if it is a regular file and never past the size it had when
 * opened: a device (`/dev/zero`), a pipe or a FIFO would be read forever, a growing file
 * until memory runs out.
 */
export function readRegularFile(path: string): Uint8Array {
  const where = `safetensors '${path}'`;
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new SafetensorsError(`${where}: cannot read the file: ${(e as Error).message}`, {
      cause: e,
    });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      const kind = st.isDirectory()
        ? "a directory"
        : st.isCharacterDevice() || st.isBlockDevice()
          ? "a device"
          : st.isFIFO()
            ? "a pipe"
            : st.isSocket()
              ? "a socket"
              : "not a regular file";
      throw new SafetensorsError(`${where}: is ${kind}, not a regular file; refusing to read it`);
    }
    if (st.size > MAX_FILE) {
      throw new SafetensorsError(
        `${where}: the file has ${st.size} bytes, more than the ${MAX_FILE} bytes one ` +
          `buffer can hold`,
      );
    }
    const bytes = new Uint8Array(st.size);
    let got = 0;
    while (got < bytes.byteLength) {
      const k = readSync(fd, bytes, got, bytes.byteLength - got, got);
      if (k === 0) break;
      got += k;
    }
    if (got < bytes.byteLength) {
      throw new SafetensorsError(
        `${where}: the file shrank while it was read (${got} of ${bytes.byteLength} bytes)`,
      );
    }
    return bytes;
  } catch (e) {
    if (e instanceof SafetensorsError) throw e;
    throw new SafetensorsError(`${where}: cannot read the file: ${(e as Error).message}`, {
      cause: e,
    });
  } finally {
    closeSync(fd);
  }
}

/** Writes `bytes` to `path`. */
export function writeFileBytes(path: string, bytes: Uint8Array): void {
  writeFileSync(path, bytes);
}
