// The browser build (`npm run build:browser`): index.browser.ts and everything it imports,
// bundled by esbuild into ONE ES module, dist/browser/kiln.js, with no import left (ts-morph and
// its TypeScript, which the source analysis needs, are inside). The Node sources are not
// forked: a module `x.ts` that has a sibling `x.browser.ts` is replaced by it in this build
// (the disk cache, the native backend, hashing, the source analysis's host, safetensors' file
// half; see docs/runtime.md, "The browser build"), and `process` — read by Kiln's settings —
// is util/process.browser.ts (an empty environment). The build fails if anything would still
// import a Node built-in, or if any of runtime/native/ other than its browser stand-in got in.
//
//   npm run build:browser            writes dist/browser/kiln.js (+ .map)
//   tsx scripts/build_browser.ts --out DIR

import { build, type Metafile, type Plugin } from "esbuild";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { sourceBuildId } from "../runtime/build_id.ts";

const ROOT = join(import.meta.dirname, "..");

/** `x.ts` → `x.browser.ts` where that exists, for Kiln's own modules. */
const browserVariants: Plugin = {
  name: "kiln-browser-variants",
  setup(b) {
    b.onResolve({ filter: /\.ts$/ }, (args) => {
      if (!args.path.startsWith(".") || args.importer.includes("node_modules")) return undefined;
      const full = join(args.resolveDir, args.path);
      if (full.endsWith(".browser.ts")) return undefined;
      const variant = full.replace(/\.ts$/, ".browser.ts");
      // The variant itself may import its Node sibling for types only; never swap that back.
      if (args.importer === variant) return undefined;
      return existsSync(variant) ? { path: variant } : undefined;
    });
  },
};

/** Any `node:` import (or a bare built-in) left is a build error that names who imports it. */
const noNodeBuiltins: Plugin = {
  name: "kiln-no-node-builtins",
  setup(b) {
    // ts-morph's own package maps its Node imports away for browsers (its `browser` field).
    b.onResolve({ filter: /^node:/ }, (args) => args.importer.includes("node_modules") ? undefined : ({
      errors: [{
        text: `${args.path} imported by ${relative(ROOT, args.importer)}: the browser build ` +
          `takes no Node built-in (give the module a .browser.ts variant)`,
      }],
    }));
  },
};

export interface BrowserBuild {
  file: string;
  bytes: number;
  /** The bundled inputs, relative to the repository (and node_modules paths as esbuild has them). */
  inputs: string[];
}

/** Builds the bundle into `outDir` (default dist/browser). */
export async function buildBrowser(outDir = join(ROOT, "dist/browser")): Promise<BrowserBuild> {
  const file = join(outDir, "kiln.js");
  mkdirSync(dirname(file), { recursive: true });
  const result = await build({
    entryPoints: [join(ROOT, "index.browser.ts")],
    outfile: file,
    bundle: true,
    format: "esm",
    platform: "browser",
    // WebAssembly SIMD128 and top-level await are needed anyway (docs/runtime.md).
    target: "es2022",
    sourcemap: true,
    inject: [join(ROOT, "util/process.browser.ts")],
    // The program cache's keys carry the build id of the sources bundled, as Node's do.
    define: { __KILN_BUILD_ID__: JSON.stringify(sourceBuildId(ROOT)) },
    plugins: [noNodeBuiltins, browserVariants],
    metafile: true,
    logLevel: "warning",
    legalComments: "none",
    // Class names as written: compiler/library_code.ts names methods by class, and module
    // names (className(), guards, errors) read as in Node.
    keepNames: true,
  });
  const inputs = Object.keys((result.metafile as Metafile).inputs);
  const native = inputs.filter(
    (p) => p.includes("runtime/native/") && !p.endsWith("runtime/native/backend.browser.ts"),
  );
  if (native.length > 0) {
    throw new Error(`the browser bundle took the native backend's modules: ${native.join(", ")}`);
  }
  const bytes = (result.metafile as Metafile).outputs[relative(process.cwd(), file)]?.bytes ?? 0;
  writeFileSync(join(outDir, "inputs.json"), `${JSON.stringify(inputs, null, 1)}\n`);
  return { file, bytes, inputs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf("--out");
  const out = i > 0 ? process.argv[i + 1] : undefined;
  const r = await buildBrowser(out);
  console.log(`${relative(process.cwd(), r.file)}: ${(r.bytes / 1e6).toFixed(1)} MB, ` +
    `${r.inputs.length} modules`);
}
