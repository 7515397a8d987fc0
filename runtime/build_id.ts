// The build id: which code of Kiln is running, beyond its version number. Every program cache
// key carries it (runtime/cache.ts), so a disk entry written by other passes, other renderers or
// another C runtime is stale, not loaded. The version alone would not do: between releases (a
// development checkout, a patched copy) the pass pipeline and the code generators change while
// package.json's version stays the same, and a cached program would then be the old pipeline's
// output — correct for the old code, not what this code would build.
//
// The id is a hash of the library's sources: every .ts file of the directories the published
// build compiles (tsconfig.build.json's `include`, less the tests) and the native backend's C
// runtime. scripts/build.ts computes it when it builds dist/ and writes it into
// dist/package.json (`build`), so the published package never hashes at start-up; a source
// checkout (tsx, vitest) hashes its files once per process, at the first cache key.

import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";

/** The directories and files (relative to the package root) whose contents make the id. */
export const BUILD_SOURCES: readonly string[] = [
  "index.ts",
  "ir",
  "util",
  "passes",
  "runtime",
  "compiler",
  "tensor",
  "optim",
  "cli",
  "models",
];

function collect(root: string, path: string, out: string[]): void {
  let entries;
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOTDIR") out.push(path);
    else if (code !== "ENOENT") throw e;
    return;
  }
  for (const d of entries) {
    const p = join(path, d.name);
    if (d.isDirectory()) {
      // The C runtime's own tests and benchmarks are not part of the package.
      if (d.name === "node_modules" || relative(root, p) === join("runtime", "native", "csrc", "test")) {
        continue;
      }
      collect(root, p, out);
    } else if (
      d.isFile() &&
      ((d.name.endsWith(".ts") && !d.name.endsWith(".test.ts")) ||
        d.name.endsWith(".h") ||
        d.name.endsWith(".c"))
    ) {
      out.push(p);
    }
  }
}

/**
 * The build id of the sources under `root` (a package root holding BUILD_SOURCES): the first 16
 * hex digits of a SHA-256 over every source file's path (relative, `/`-separated) and bytes, in
 * sorted path order.
 */
export function sourceBuildId(root: string): string {
  const files: string[] = [];
  for (const s of BUILD_SOURCES) collect(root, join(root, s), files);
  const rel = files.map((f) => ({ f, r: relative(root, f).split(sep).join("/") }));
  rel.sort((a, b) => (a.r < b.r ? -1 : a.r > b.r ? 1 : 0));
  const h = createHash("sha256");
  for (const { f, r } of rel) {
    const bytes = readFileSync(f);
    h.update(`${r}\0${bytes.length}\0`);
    h.update(bytes);
  }
  return h.digest("hex").slice(0, 16);
}
