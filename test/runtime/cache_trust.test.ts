// The program cache's trust model (runtime/cache_disk.ts, runtime/cache.ts): an entry runs only
// if the user's own Kiln wrote it for that key. Planted code (a line that writes a marker file
// prepended to a stored js program) under every integrity value an attacker can compute — a
// SHA-256 of the body or of header and body in the MAC's place, an HMAC under a guessed
// secret, the old format's correct SHA-256, no key at all — never runs in a new process (the
// marker never appears; a control proves the planted program would leave it); the bodies of
// two same-signature entries (add and subtract on f32[4]) swapped never serve the other key; a
// stored module proto replaced by random bytes is rejected; a directory, entry or secret that
// is not the user's alone is not used, with a warning naming it and why; a missing secret is
// made anew (old entries then fail their MAC), a damaged one refused, never replaced; processes
// racing on a fresh directory agree on one secret; a read-only directory keeps serving its
// entries. Natively, kernel libraries replaced by a planted .so never load (a program whose
// libraries fail their MAC is recompiled); the store-level .so forgeries are in
// native_libcache.test.ts.

import { spawn } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { literal, type Literal } from "../../ir/literal.ts";
import { moduleFromProto } from "../../ir/proto.ts";
import { ProgramCache, type ProgramCacheOptions } from "../../runtime/cache.ts";
import { entryFileName, FORMAT_VERSION, SECRET_NAME } from "../../runtime/cache_disk.ts";
import { compileKeyOptions, compileModule } from "../../runtime/compile.ts";
import { jsBackend } from "../../runtime/js/backend.ts";
import { PAYLOAD_HEADER_BYTES } from "../../runtime/js/payload.ts";
import { compileSharedObjects, findCompiler } from "../../runtime/native/toolchain.ts";
import { binaryModule } from "./fixtures/cache_trust_modules.ts";
import { FakeBackend } from "./fixtures/fake_backend.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const worker = join(here, "fixtures", "cache_trust_worker.ts");
const isRoot = process.getuid?.() === 0;
const ci = process.env["CI"] !== undefined && !["", "0", "false"].includes(process.env["CI"]!);
const haveCompiler = findCompiler().ok;

let root: string;
let dir: string;
let marker: string;
let warnings: string[];
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "kiln-trust-"));
  dir = join(root, "programs");
  marker = join(root, "PLANTED-CODE-RAN");
  warnings = [];
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

const SUM = [11, 22, 33, 44];
const DIFFERENCE = [-9, -18, -27, -36];
type Op = "add" | "subtract";

function cache(opts: ProgramCacheOptions = {}): ProgramCache {
  return new ProgramCache({ disk: dir, onWarning: (w) => warnings.push(w), ...opts });
}

/** Compiles `ops` into `dir` through compileModule (the passes' module proto is stored). */
function populate(ops: readonly Op[]): void {
  const c = cache();
  for (const op of ops) compileModule(binaryModule(op), { backend: "js", cache: c });
  expect(c.stats.writes).toBe(ops.length);
}

function entryPath(op: Op): string {
  const key = cache().keyFor(binaryModule(op), jsBackend, compileKeyOptions({}));
  return join(dir, entryFileName(key));
}

function entryNames(): string[] {
  return readdirSync(dir).filter((n) => n.endsWith(".kprog")).sort();
}

interface WorkerOut {
  runs: Record<string, { hit: string; result: number[] }>;
  stats: ProgramCache["stats"];
  warnings: string[];
  stderr: string;
}

/** A new node process that compiles or loads `ops` from `dir` and runs them. */
function runWorker(
  ops: readonly Op[],
  backend = "js",
  env: NodeJS.ProcessEnv = {},
): Promise<WorkerOut> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", worker, dir, ops.join(","), backend], {
      cwd: repoRoot,
      env: { ...process.env, KILN_LOGS: "cache", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.stderr.on("data", (d: Buffer) => (err += d.toString()));
    p.on("error", reject);
    p.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`worker exited ${code}: ${err}`));
        return;
      }
      resolve({ ...(JSON.parse(out.trim()) as Omit<WorkerOut, "stderr">), stderr: err });
    });
  });
}

// ---- The documented entry layout, for forging entries as an attacker would ------------------

interface EntryParts {
  keyText: string;
  header: Buffer; // magic .. body length
  body: Buffer; // module proto length | module proto | payload
  mac: Buffer;
  proto: Buffer;
  payload: Buffer;
}

function splitEntry(bytes: Buffer): EntryParts {
  const keyLength = bytes.readUInt32LE(12);
  const bodyStart = 16 + keyLength + 8;
  const bodyLength = Number(bytes.readBigUInt64LE(16 + keyLength));
  const body = bytes.subarray(bodyStart, bodyStart + bodyLength);
  expect(bytes.length).toBe(bodyStart + bodyLength + 32);
  const protoLength = body.readUInt32LE(0);
  return {
    keyText: bytes.toString("utf8", 16, 16 + keyLength),
    header: bytes.subarray(0, bodyStart),
    body,
    mac: bytes.subarray(bodyStart + bodyLength),
    proto: body.subarray(4, 4 + protoLength),
    payload: body.subarray(4 + protoLength),
  };
}

/** The current layout around `body`, with `trailer` in the MAC's place. */
function v2Entry(keyText: string, body: Buffer, trailer: (signed: Buffer) => Buffer): Buffer {
  const key = Buffer.from(keyText, "utf8");
  const head = Buffer.alloc(16 + key.length + 8);
  head.write("KILNPROG", 0, "latin1");
  head.writeUInt32LE(FORMAT_VERSION, 8);
  head.writeUInt32LE(key.length, 12);
  key.copy(head, 16);
  head.writeBigUInt64LE(BigInt(body.length), 16 + key.length);
  const signed = Buffer.concat([head, body]);
  return Buffer.concat([signed, trailer(signed)]);
}

/** The format-1 layout: the body's SHA-256 in the header, which anyone can recompute. */
function v1Entry(keyText: string, body: Buffer): Buffer {
  const key = Buffer.from(keyText, "utf8");
  const head = Buffer.alloc(16 + key.length + 40);
  head.write("KILNPROG", 0, "latin1");
  head.writeUInt32LE(1, 8);
  head.writeUInt32LE(key.length, 12);
  key.copy(head, 16);
  head.writeBigUInt64LE(BigInt(body.length), 16 + key.length);
  createHash("sha256").update(body).digest().copy(head, 16 + key.length + 8);
  return Buffer.concat([head, body]);
}

function sha256(b: Uint8Array): Buffer {
  return createHash("sha256").update(b).digest();
}

function bodyOf(proto: Uint8Array, payload: Uint8Array): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(proto.length, 0);
  return Buffer.concat([len, proto, payload]);
}

/** A js payload whose source first writes `path` (runtime/js/payload.ts's layout). */
function plantedPayload(payload: Buffer, path: string): Buffer {
  const metaLength = payload.readUInt32LE(16);
  const blobLength = payload.readUInt32LE(20);
  const sourceAt = PAYLOAD_HEADER_BYTES + metaLength + blobLength;
  const line = `process.getBuiltinModule("fs").writeFileSync(${JSON.stringify(path)}, "ran");\n`;
  const source = Buffer.concat([Buffer.from(line), payload.subarray(sourceAt)]);
  const out = Buffer.concat([payload.subarray(0, sourceAt), source]);
  out.writeUInt32LE(source.length, 24);
  return out;
}

function run(m: { run(inputs: readonly Literal[]): unknown }): number[] {
  const out = m.run([literal("f32", [4], [1, 2, 3, 4]), literal("f32", [4], [10, 20, 30, 40])]);
  return Array.from((out as Literal).data as Float32Array);
}

// ---- Planted code ----------------------------------------------------------------------------

describe("planted code in an entry never runs", () => {
  it("the marker works: the planted payload, loaded directly, leaves it", () => {
    populate(["add"]);
    const e = splitEntry(readFileSync(entryPath("add")));
    const control = join(root, "CONTROL");
    const payload = plantedPayload(e.payload, control);
    const exe = jsBackend.deserialize!(moduleFromProto(e.proto), payload);
    expect(run(exe)).toEqual(SUM);
    expect(existsSync(control)).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });

  const forgeries: { name: string; reason: string; file: (e: EntryParts) => Buffer }[] = [
    {
      name: "the current layout with the body's SHA-256 in place of the MAC",
      reason: "mac",
      file: (e) => {
        const body = bodyOf(e.proto, plantedPayload(e.payload, marker));
        return v2Entry(e.keyText, body, () => sha256(body));
      },
    },
    {
      name: "the current layout with a SHA-256 over header and body",
      reason: "mac",
      file: (e) =>
        v2Entry(e.keyText, bodyOf(e.proto, plantedPayload(e.payload, marker)), sha256),
    },
    {
      name: "the current layout MAC'd under a guessed secret",
      reason: "mac",
      file: (e) => {
        const body = bodyOf(e.proto, plantedPayload(e.payload, marker));
        // the real MAC's construction (the source is public), under a key that is not the
        // user's secret
        return v2Entry(e.keyText, body, (signed) => {
          const key = Buffer.from(e.keyText, "utf8");
          const len = Buffer.alloc(4);
          len.writeUInt32LE(key.length, 0);
          const h = createHmac("sha256", randomBytes(32)).update("kiln-program\0", "latin1");
          return h.update(len).update(key).update(signed).digest();
        });
      },
    },
    {
      name: "the old format (1) with a correct SHA-256",
      reason: "stale",
      file: (e) => v1Entry(e.keyText, bodyOf(e.proto, plantedPayload(e.payload, marker))),
    },
    {
      name: "no key: the current layout with an empty key and a correct SHA-256",
      reason: "header-garbage",
      file: (e) => v2Entry("", bodyOf(e.proto, plantedPayload(e.payload, marker)), sha256),
    },
    {
      name: "no key: the old layout with an empty key and a correct SHA-256",
      reason: "stale",
      file: (e) => v1Entry("", bodyOf(e.proto, plantedPayload(e.payload, marker))),
    },
    {
      name: "no header at all: the bare planted payload",
      reason: "header-garbage",
      file: (e) => plantedPayload(e.payload, marker),
    },
  ];

  for (const f of forgeries) {
    it(`${f.name} → ${f.reason}, in a new process`, async () => {
      populate(["add"]);
      const file = entryPath("add");
      writeFileSync(file, f.file(splitEntry(readFileSync(file))), { mode: 0o600 });
      const r = await runWorker(["add"]);
      expect(existsSync(marker)).toBe(false);
      expect(r.runs["add"]).toEqual({ hit: "miss", backend: "js", result: SUM });
      expect(r.stats.discarded).toBe(1);
      expect(r.stats.discardReasons[f.reason as keyof typeof r.stats.discardReasons]).toBe(1);
      expect(r.stderr).toContain(`[kiln:cache] discard ${file}: ${f.reason}: `);
      // the entry written in its place is the user's own again
      expect(splitEntry(readFileSync(file)).payload.includes("PLANTED")).toBe(false);
    }, 60_000);
  }

  it("the rewritten entry serves the next process, still without the marker", async () => {
    populate(["add"]);
    const file = entryPath("add");
    const e = splitEntry(readFileSync(file));
    writeFileSync(file, v1Entry(e.keyText, bodyOf(e.proto, plantedPayload(e.payload, marker))));
    expect((await runWorker(["add"])).runs["add"]!.hit).toBe("miss");
    const again = await runWorker(["add"]);
    expect(again.runs["add"]).toEqual({ hit: "disk", backend: "js", result: SUM });
    expect(again.stats.discarded).toBe(0);
    expect(existsSync(marker)).toBe(false);
  }, 60_000);
});

describe("an entry serves only the key it was written for", () => {
  it("swapped bodies of add and subtract, hashes recomputed or not, never serve", async () => {
    for (const recompute of [false, true]) {
      rmSync(dir, { recursive: true, force: true });
      populate(["add", "subtract"]);
      const [fa, fs] = [entryPath("add"), entryPath("subtract")];
      const [a, s] = [splitEntry(readFileSync(fa)), splitEntry(readFileSync(fs))];
      // same signature, same shape of program: only the generated source differs
      expect(a.body.equals(s.body)).toBe(false);
      const swapped = (head: EntryParts, from: EntryParts) =>
        recompute
          ? v2Entry(head.keyText, from.body, sha256)
          : Buffer.concat([head.header.subarray(0, head.header.length - 8), lengthOf(from.body),
              from.body, from.mac]);
      writeFileSync(fa, swapped(a, s));
      writeFileSync(fs, swapped(s, a));
      const r = await runWorker(["add", "subtract"]);
      expect(r.runs).toEqual({
        add: { hit: "miss", backend: "js", result: SUM },
        subtract: { hit: "miss", backend: "js", result: DIFFERENCE },
      });
      expect(r.stats.discardReasons.mac).toBe(2);
    }
  }, 60_000);

  it("a stored module proto replaced by random bytes is rejected, MAC kept or not", async () => {
    populate(["add"]);
    const file = entryPath("add");
    const e = splitEntry(readFileSync(file));
    expect(e.proto.length).toBeGreaterThan(0); // compileModule's passes' module is stored
    const junk = randomBytes(e.proto.length);
    const body = bodyOf(junk, e.payload);
    writeFileSync(file, Buffer.concat([e.header, body, e.mac]));
    const r = await runWorker(["add"]);
    expect(r.runs["add"]).toEqual({ hit: "miss", backend: "js", result: SUM });
    expect(r.stats.discardReasons.mac).toBe(1);
    // and in this process, with a recomputed SHA-256 in the MAC's place
    writeFileSync(file, v2Entry(e.keyText, bodyOf(junk, e.payload), sha256));
    const c = cache();
    const hit = compileModule(binaryModule("add"), { backend: "js", cache: c });
    expect(hit.hit).toBe("miss");
    expect(c.stats.discardReasons.mac).toBe(1);
    expect(run(hit.executable)).toEqual(SUM);
  }, 60_000);
});

function lengthOf(body: Buffer): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(body.length), 0);
  return b;
}

// ---- Native: a planted shared object never loads --------------------------------------------

// A planted library's constructor runs the moment anything dlopens it, so its marker file is
// proof that planted bytes reached the loader (native_libcache.test.ts proves the marker works
// and covers every forgery at the store's level; this is the whole path, in new processes).
describe.runIf(haveCompiler || ci)("native: a planted kernel library never loads", () => {
  it("kernels replaced by a planted .so, hashes recomputed: no marker, the right sum", async () => {
    const cacheRoot = join(root, "cache");
    const libs = join(cacheRoot, "native");
    mkdirSync(libs, { recursive: true, mode: 0o700 });
    // The runtime addon another test file may have built: its entry and the secret it is MAC'd
    // under, so this test need not build the addon again (it does when there is none).
    const shared = process.env["KILN_CACHE_DIR"];
    if (shared !== undefined && existsSync(join(shared, "native", SECRET_NAME))) {
      for (const n of readdirSync(join(shared, "native"))) {
        if (n === SECRET_NAME || n.endsWith(".klib")) {
          copyFileSync(join(shared, "native", n), join(libs, n));
          chmodSync(join(libs, n), 0o600);
        }
      }
    }
    dir = join(cacheRoot, "programs");
    const env = { KILN_CACHE_DIR: cacheRoot };
    const first = await runWorker(["add"], "native", env);
    expect(first.runs["add"]).toMatchObject({ backend: "native", result: SUM });

    const lib = (body: string) =>
      '#include "kiln_rt.h"\n#include <stdio.h>\n' +
      body +
      "static const char* const n[] = {0};\nstatic const void* const f[] = {0};\n" +
      "KILN_EXPORT const KilnLibrary kiln_library_v1 = {KILN_ABI_VERSION, 0, n, f, 0};\n";
    const plant =
      `static void mark(void) { FILE* m = fopen(${JSON.stringify(marker)}, "w"); ` +
      "if (m) fclose(m); }\n__attribute__((constructor)) static void planted(void) { mark(); }\n";
    const so = join(root, "planted.so");
    const built = compileSharedObjects([{ source: lib(plant), out: so }]);
    expect(built[0]!.ok, built[0]!.stderr).toBe(true);
    const planted = readFileSync(so);

    // Every kernel library entry becomes the planted .so in the store's own layout, with a
    // SHA-256 over header and body where the MAC goes (all an attacker without the secret has).
    let kernels = 0;
    for (const n of readdirSync(libs).filter((x) => x.endsWith(".klib"))) {
      const bytes = readFileSync(join(libs, n));
      const keyLength = bytes.readUInt32LE(12);
      const key = bytes.toString("utf8", 16, 16 + keyLength);
      if (!key.startsWith("kiln-native-kernels/")) continue;
      kernels++;
      const head = Buffer.from(bytes.subarray(0, 16 + keyLength + 8));
      head.writeBigUInt64LE(BigInt(planted.length), 16 + keyLength);
      const signed = Buffer.concat([head, planted]);
      writeFileSync(join(libs, n), Buffer.concat([signed, sha256(signed)]), { mode: 0o600 });
    }
    expect(kernels).toBeGreaterThan(0);

    const second = await runWorker(["add"], "native", env);
    expect(existsSync(marker)).toBe(false);
    expect(second.runs["add"]).toEqual({ hit: "miss", backend: "native", result: SUM });
    // the program entry named libraries that failed their MAC: it could not load
    expect(second.stats.discardReasons.undecodable).toBe(1);
    expect(second.stderr).toMatch(/native: discarded [0-9a-f]{64}\.klib: mac: /);
    const third = await runWorker(["add"], "native", env);
    expect(third.runs["add"]).toEqual({ hit: "disk", backend: "native", result: SUM });
    expect(existsSync(marker)).toBe(false);
  }, 300_000);
});

// ---- Ownership and modes ---------------------------------------------------------------------

function compileAdd(c: ProgramCache) {
  return compileModule(binaryModule("add"), { backend: "js", cache: c });
}

describe("only what the user alone can write is used", () => {
  it("creates the directory 0700, the secret 0600 (32 bytes) and entries 0600", () => {
    populate(["add"]);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const secret = statSync(join(dir, SECRET_NAME));
    expect([secret.mode & 0o777, secret.size]).toEqual([0o600, 32]);
    expect(statSync(entryPath("add")).mode & 0o777).toBe(0o600);
  });

  for (const mode of [0o770, 0o702, 0o777]) {
    it(`a directory of mode ${mode.toString(8)} is not used: a warning, memory only`, () => {
      populate(["add"]);
      chmodSync(dir, mode);
      const c = cache();
      const r = compileAdd(c);
      expect(r.hit).toBe("miss");
      expect(run(r.executable)).toEqual(SUM);
      expect(c.stats.writes).toBe(0);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(dir);
      expect(warnings[0]).toMatch(/writable by group or others \(mode 0[0-7]{3}\)/);
      expect(warnings[0]).toContain("memory only");
      expect(c.info()).toMatchObject({ disk: false, diskEntries: 0 });
      expect(c.info().diskDisabled).toMatch(/^not trusted: /);
      expect(c.entries()).toEqual([]);
      expect(compileAdd(c).hit).toBe("memory");
      expect(warnings).toHaveLength(1); // once per cache
    });
  }

  it("a directory that is a symbolic link is not used", () => {
    const real = join(root, "real");
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, dir);
    const c = cache();
    expect(compileAdd(c).hit).toBe("miss");
    expect(warnings[0]).toMatch(/symbolic link/);
    expect(readdirSync(real)).toEqual([]);
  });

  it.runIf(isRoot)("a directory or entry owned by another user is not used", () => {
    populate(["add"]);
    chownSync(entryPath("add"), 12345, 12345);
    let c = cache();
    expect(compileAdd(c).hit).toBe("miss");
    expect(c.stats.discardReasons.untrusted).toBe(1);
    expect(warnings.join("\n")).toMatch(/owned by uid 12345, not by uid 0/);
    expect(statSync(entryPath("add")).uid).toBe(0); // replaced by the user's own
    warnings = [];
    chownSync(dir, 12345, 12345);
    c = cache();
    expect(compileAdd(c).hit).toBe("miss");
    expect(warnings[0]).toContain(dir);
    expect(warnings[0]).toMatch(/owned by uid 12345/);
    expect(c.info().disk).toBe(false);
  });

  for (const mode of [0o620, 0o602]) {
    it(`an entry of mode ${mode.toString(8)} is discarded as untrusted, with a warning`, () => {
      populate(["add"]);
      const file = entryPath("add");
      chmodSync(file, mode);
      const c = cache();
      expect(compileAdd(c).hit).toBe("miss");
      expect(c.stats.discardReasons.untrusted).toBe(1);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(file);
      expect(warnings[0]).toMatch(/writable by group or others/);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(compileAdd(cache()).hit).toBe("disk");
    });
  }

  it("an entry that is a symbolic link (to a valid entry) is discarded as untrusted", () => {
    populate(["add"]);
    const file = entryPath("add");
    const elsewhere = join(root, "elsewhere.kprog");
    writeFileSync(elsewhere, readFileSync(file));
    unlinkSync(file);
    symlinkSync(elsewhere, file);
    const c = cache();
    expect(compileAdd(c).hit).toBe("miss");
    expect(c.stats.discardReasons.untrusted).toBe(1);
    expect(warnings[0]).toMatch(/symbolic link/);
  });
});

// ---- The secret ------------------------------------------------------------------------------

describe("the secret", () => {
  it("missing: a new one is made, and entries MAC'd under the old one are discarded", () => {
    populate(["add"]);
    const old = readFileSync(join(dir, SECRET_NAME));
    unlinkSync(join(dir, SECRET_NAME));
    const c = cache();
    expect(compileAdd(c).hit).toBe("miss");
    expect(c.stats.discardReasons.mac).toBe(1);
    const now = readFileSync(join(dir, SECRET_NAME));
    expect(now.length).toBe(32);
    expect(now.equals(old)).toBe(false);
    expect(compileAdd(cache()).hit).toBe("disk");
    expect(warnings).toEqual([]);
  });

  const damaged: { name: string; make: (p: string) => void; why: RegExp }[] = [
    {
      name: "short",
      make: (p) => {
        writeFileSync(p, Buffer.alloc(5), { mode: 0o600 });
        const past = Date.now() / 1000 - 60; // not a writer still filling it in
        utimesSync(p, past, past);
      },
      why: /is 5 bytes, not 32 \(delete it to start over\)/,
    },
    {
      name: "long",
      make: (p) => writeFileSync(p, Buffer.alloc(64), { mode: 0o600 }),
      why: /is 64 bytes, not 32/,
    },
    {
      name: "readable by others",
      make: (p) => {
        writeFileSync(p, randomBytes(32));
        chmodSync(p, 0o644);
      },
      why: /readable or writable by group or others \(mode 0644\)/,
    },
    {
      name: "a symbolic link",
      make: (p) => {
        const target = join(root, "their-secret");
        writeFileSync(target, randomBytes(32), { mode: 0o600 });
        symlinkSync(target, p);
      },
      why: /symbolic link/,
    },
    {
      name: "a directory",
      make: (p) => mkdirSync(p),
      why: /is not a file|cannot be read/,
    },
  ];

  for (const d of damaged) {
    it(`${d.name}: refused with a warning naming it, never replaced; compiles still work`, () => {
      mkdirSync(dir, { mode: 0o700 });
      const p = join(dir, SECRET_NAME);
      d.make(p);
      const before = statSync(p, { throwIfNoEntry: false })?.ino;
      const c = cache();
      const r = compileAdd(c);
      expect(r.hit).toBe("miss");
      expect(run(r.executable)).toEqual(SUM);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(p);
      expect(warnings[0]).toMatch(d.why);
      expect(c.info().disk).toBe(false);
      expect(entryNames()).toEqual([]);
      expect(statSync(p, { throwIfNoEntry: false })?.ino).toBe(before);
    });
  }

  it("4 processes starting on a fresh directory agree on one secret", async () => {
    const runs = await Promise.all([0, 1, 2, 3].map(() => runWorker(["add", "subtract"])));
    for (const r of runs) {
      expect(r.runs["add"]!.result).toEqual(SUM);
      expect(r.stats.discarded).toBe(0);
      expect(r.warnings).toEqual([]);
    }
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    // whichever process wrote last, its entries verify under the one secret on disk
    const c = cache();
    expect(compileAdd(c).hit).toBe("disk");
    expect(compileModule(binaryModule("subtract"), { backend: "js", cache: c }).hit)
      .toBe("disk");
    expect(c.stats.discarded).toBe(0);
  }, 120_000);
});

// ---- A read-only directory -------------------------------------------------------------------

describe("a read-only cache directory keeps serving reads", () => {
  for (const code of ["EROFS", "EACCES", "EPERM"]) {
    it(`a refused mtime update (${code}) costs no hit: 5 of 5 valid entries load`, () => {
      const modules = [1, 2, 3, 4, 5].map((i) => {
        const m = binaryModule(i % 2 === 0 ? "add" : "subtract");
        return { m, options: { variant: i } };
      });
      const w = cache();
      for (const { m, options } of modules) w.getOrCompile(m, new FakeBackend(), options);
      expect(w.stats.writes).toBe(5);
      let refused = 0;
      const touch = () => {
        refused++;
        throw Object.assign(new Error(`${code}: read-only file system, utime`), { code });
      };
      const fake = new FakeBackend();
      const c = cache({ touch });
      for (const { m, options } of modules) {
        expect(c.getOrCompile(m, fake, options).hit).toBe("disk");
      }
      expect(refused).toBe(5);
      expect(fake.compiles).toBe(0);
      expect(c.stats).toMatchObject({ diskHits: 5, misses: 0, discarded: 0 });
      expect(c.info()).toMatchObject({ disk: true, diskDisabled: undefined });
      expect(warnings).toEqual([]);
    });
  }

  it("a failed write stops writes only: the entries there still load", () => {
    const [a, b] = [binaryModule("add"), binaryModule("subtract")];
    cache().getOrCompile(a, new FakeBackend());
    // b's entry name is taken by a non-empty directory, so renaming a temp file onto it fails
    const blocked = join(dir, entryFileName(cache().keyFor(b, new FakeBackend())));
    mkdirSync(join(blocked, "x"), { recursive: true });
    const fake = new FakeBackend();
    const c = cache();
    expect(c.getOrCompile(b, fake).hit).toBe("miss");
    expect(warnings.some((w) => w.includes("cannot write") && w.includes("still read"))).toBe(
      true,
    );
    expect(c.info().diskWritesDisabled).toMatch(/^cannot write /);
    expect(c.getOrCompile(a, fake).hit).toBe("disk");
    expect(c.info().disk).toBe(true);
  });
});
