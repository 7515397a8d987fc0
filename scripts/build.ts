// The published build (`npm run build`, run by `prepare` on `npm ci` and `npm pack`): tsc
// compiles the library's .ts sources into dist/ as ESM JavaScript plus .d.ts
// (tsconfig.build.json), then the files the compiled code finds next to itself are put beside
// it, so dist/ runs on plain Node exactly as the sources run under tsx:
//   - runtime/native/csrc/ (the native backend's C runtime, read relative to toolchain.ts and
//     addon.ts),
//   - cli/kiln.js (the `bin`; it runs dist/cli/main.js),
//   - a package.json with the type, the version and the build id (runtime/cache.ts reads
//     `../package.json` for both, which go into every cache key; it also marks dist/ as ESM on
//     its own).

import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { sourceBuildId } from "../runtime/build_id.ts";

const root = join(import.meta.dirname, "..");
const dist = join(root, "dist");

rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], {
  stdio: "inherit",
});
if (r.status !== 0) process.exit(r.status ?? 1);

// csrc/test/ holds the C runtime's own tests and benchmarks: not part of the package.
const csrc = join(root, "runtime/native/csrc");
cpSync(csrc, join(dist, "runtime/native/csrc"), {
  recursive: true,
  filter: (src) => src !== join(csrc, "test"),
});
copyFileSync(join(root, "cli/kiln.js"), join(dist, "cli/kiln.js"));
chmodSync(join(dist, "cli/kiln.js"), 0o755);
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
// The build id of the sources compiled (runtime/build_id.ts): dist/ has no .ts files to hash.
const build = sourceBuildId(root);
writeFileSync(
  join(dist, "package.json"),
  `${JSON.stringify({ type: "module", version: pkg.version, build, private: true }, null, 2)}\n`,
);
