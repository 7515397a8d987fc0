// Kiln as a user gets it, for the tests that check the published package (package.test.ts,
// docs.test.ts): `npm pack` of this checkout (which runs `prepare`, the build into dist/),
// installed into a fresh project in a temporary directory with plain `npm ci`, plus TypeScript
// and @types/node as a user's project has them. Nothing is downloaded: the project's lockfile
// is written from this repository's package-lock.json (the same versions, resolved URLs and
// integrity hashes), so `npm ci --offline` takes every tarball from the npm cache that this
// checkout's own `npm ci` filled. Within one vitest run the pack and install happen once: the
// first test file to ask does them under a lock and the others reuse the project (the key is
// the run's KILN_CACHE_DIR, a fresh directory per run, see vitest.config.ts).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

export const REPO = join(import.meta.dirname, "..");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  dev?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  [key: string]: unknown;
}

/** The lockfile entries `roots` need, at the paths npm put them in this repository. */
function closure(packages: Record<string, LockEntry>, roots: string[]): Record<string, LockEntry> {
  const out: Record<string, LockEntry> = {};
  const visit = (from: string, name: string): void => {
    // Node's lookup: the nearest node_modules/<name> walking up from the requiring package.
    let base = from;
    for (;;) {
      const key = `${base === "" ? "" : `${base}/`}node_modules/${name}`;
      if (packages[key]) {
        if (out[key]) return;
        const e = packages[key]!;
        out[key] = e;
        const deps = { ...e.dependencies, ...e.optionalDependencies, ...e.peerDependencies };
        for (const d of Object.keys(deps)) visit(key, d);
        return;
      }
      if (base === "") return; // an optional dependency for another platform: not in the lock
      const i = base.lastIndexOf("/node_modules/");
      base = i < 0 ? "" : base.slice(0, i);
    }
  };
  for (const r of roots) visit("", r);
  return out;
}

function sh(cmd: string, args: string[], cwd: string): string {
  try {
    return execFileSync(cmd, args, {
      cwd,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, npm_config_update_notifier: "false" },
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${err.stdout ?? ""}\n` +
      `${err.stderr ?? err.message}`);
  }
}

function build(dir: string): void {
  const packDir = join(dir, "pack");
  mkdirSync(packDir);
  sh(NPM, ["pack", "--pack-destination", packDir, "--silent"], REPO);
  const tarball = readdirSync(packDir).find((f) => f.endsWith(".tgz"));
  if (!tarball) throw new Error(`npm pack left no tarball in ${packDir}`);

  const project = join(dir, "project");
  mkdirSync(project);
  const repoLock = JSON.parse(readFileSync(join(REPO, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const repoPkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as LockEntry & {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
    bin: Record<string, string>;
    engines: Record<string, string>;
    license: string;
  };
  const tools = ["typescript", "@types/node"];
  const resolvedTarball = `file:../pack/${tarball}`;
  const bytes = readFileSync(join(packDir, tarball));
  const pkg = {
    name: "kiln-user",
    private: true,
    type: "module",
    dependencies: { kiln: resolvedTarball },
    devDependencies: Object.fromEntries(tools.map((t) => [t, repoPkg.devDependencies[t]!])),
  };
  const deps = closure(repoLock.packages, [...Object.keys(repoPkg.dependencies), ...tools]);
  for (const e of Object.values(deps)) delete e.dev;
  for (const t of tools) deps[`node_modules/${t}`]!.dev = true;
  const lock = {
    name: pkg.name,
    lockfileVersion: 3,
    requires: true,
    packages: {
      "": { name: pkg.name, dependencies: pkg.dependencies, devDependencies: pkg.devDependencies },
      "node_modules/kiln": {
        version: repoPkg.version,
        resolved: resolvedTarball,
        integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
        license: repoPkg.license,
        dependencies: repoPkg.dependencies,
        bin: Object.fromEntries(
          Object.entries(repoPkg.bin).map(([k, v]) => [k, v.replace(/^\.\//, "")]),
        ),
        engines: repoPkg.engines,
      },
      ...deps,
    },
  };
  writeFileSync(join(project, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  writeFileSync(join(project, "package-lock.json"), `${JSON.stringify(lock, null, 2)}\n`);
  sh(NPM, ["ci", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], project);
}

/**
 * The temporary project with the packed Kiln installed (node_modules/kiln). KILN_PACKED_PROJECT
 * names an existing one to reuse instead (while editing docs: no rebuild of an unchanged Kiln).
 */
export function packedProject(): string {
  const reuse = process.env["KILN_PACKED_PROJECT"];
  if (reuse) return reuse;
  const runKey = process.env["KILN_CACHE_DIR"];
  const dir = runKey
    ? join(tmpdir(), `kiln-packed-${basename(runKey)}`)
    : mkdtempSync(join(tmpdir(), "kiln-packed-"));
  const lock = `${dir}.lock`;
  const done = join(dir, "done");
  const failed = join(dir, "failed");
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    if (existsSync(done)) return join(dir, "project");
    if (existsSync(failed)) throw new Error(readFileSync(failed, "utf8"));
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    build(dir);
    writeFileSync(done, "");
    return join(dir, "project");
  } catch (e) {
    writeFileSync(failed, (e as Error).message);
    throw e;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
