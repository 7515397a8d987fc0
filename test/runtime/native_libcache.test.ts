// The native library cache (runtime/native/libcache.ts), always in fresh temp dirs: round trips,
// permissions of what it creates, every kind of tampering (a flipped body byte, truncation,
// trailing bytes, edited key text, a renamed entry, swapped bodies with whatever checksum an
// attacker can recompute, a forged MAC, a stale format, garbage) discarded by reason and never
// returned, planted libraries that must never run (their constructor would leave a marker
// file), untrusted directories, secrets and entry files (mode and owner), a filesystem that
// refuses mtime updates, LRU eviction, and 4 real processes racing on one key, on different
// keys and on one build.

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
import { encodeEntry } from "../../runtime/cache_disk.ts";
import { buildNativeAddon, type NativeAddon } from "../../runtime/native/addon.ts";
import {
  decodeLibEntry,
  DEFAULT_NATIVE_CACHE_MAX_BYTES,
  encodeLibEntry,
  LibCache,
  type LibCacheOptions,
  type LibDiscardReason,
  libEntryName,
  LIB_FORMAT_VERSION,
  nativeCacheDir,
  nativeCacheMaxBytes,
} from "../../runtime/native/libcache.ts";
import { compileSharedObjects, findCompiler } from "../../runtime/native/toolchain.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const fixtures = join(here, "fixtures", "native");

const ci = process.env["CI"] !== undefined && !["", "0", "false"].includes(process.env["CI"]!);
const haveCompiler = findCompiler().ok;
const isRoot = process.getuid?.() === 0;

let root: string;
let dir: string;
let warnings: string[];
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "kiln-libcache-"));
  dir = join(root, "native");
  warnings = [];
});
afterEach(() => {
  try {
    chmodSync(dir, 0o700);
  } catch {
    // not created
  }
  rmSync(root, { recursive: true, force: true });
});

function cache(opts: LibCacheOptions = {}): LibCache {
  return new LibCache({ dir, onWarning: (m) => warnings.push(m), ...opts });
}

function bytes(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (seed * 131 + i * 7) & 255;
  return out;
}

function entryPath(key: string): string {
  return join(dir, libEntryName(key));
}

function secret(): Buffer {
  return readFileSync(join(dir, "secret"));
}

describe("the native library cache", () => {
  it("stores, verifies and serves bytes across instances", () => {
    const a = cache();
    expect(a.get("k1")).toBeUndefined();
    a.put("k1", bytes(1000));
    const b = cache();
    expect(Buffer.from(b.get("k1")!)).toEqual(Buffer.from(bytes(1000)));
    let builds = 0;
    const build = () => {
      builds++;
      return bytes(500, 2);
    };
    expect(Buffer.from(b.getOrBuild("k2", build))).toEqual(Buffer.from(bytes(500, 2)));
    expect(Buffer.from(cache().getOrBuild("k2", build))).toEqual(Buffer.from(bytes(500, 2)));
    expect(builds).toBe(1);
    const info = cache().info();
    expect(info).toMatchObject({ dir, entries: 2, trusted: true });
    expect(info.bytes).toBeGreaterThan(1500);
    expect(Object.values(info.discarded).every((n) => n === 0)).toBe(true);
    expect(readdirSync(dir).filter((n) => n.includes(".lock") || n.endsWith(".tmp"))).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it("creates its directory 0700, a 32-byte 0600 secret and 0600 entries", () => {
    cache().put("k", bytes(10));
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "secret")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "secret")).size).toBe(32);
    expect(statSync(entryPath("k")).mode & 0o777).toBe(0o600);
    expect(libEntryName("k")).toBe(`${createHash("sha256").update("k").digest("hex")}.klib`);
  });

  it("lives in <KILN_CACHE_DIR>/native, within KILN_NATIVE_CACHE_MAX_BYTES", () => {
    expect(nativeCacheDir({ KILN_CACHE_DIR: "/k" })).toBe(join("/k", "native"));
    expect(nativeCacheMaxBytes({})).toBe(DEFAULT_NATIVE_CACHE_MAX_BYTES);
    expect(DEFAULT_NATIVE_CACHE_MAX_BYTES).toBe(1024 ** 3);
    expect(nativeCacheMaxBytes({ KILN_NATIVE_CACHE_MAX_BYTES: "12345" })).toBe(12345);
    expect(nativeCacheMaxBytes({ KILN_NATIVE_CACHE_MAX_BYTES: "lots" })).toBe(1024 ** 3);
  });

  it("a failed build propagates its error and leaves no lock behind", () => {
    const c = cache();
    expect(() =>
      c.getOrBuild("k", () => {
        throw new Error("the compiler said no");
      }),
    ).toThrow("the compiler said no");
    expect(readdirSync(dir).filter((n) => n.endsWith(".lock"))).toEqual([]);
    expect(Buffer.from(c.getOrBuild("k", () => bytes(8)))).toEqual(Buffer.from(bytes(8)));
  });

  it("takes over the lock of a builder that died", () => {
    const c = cache();
    c.put("warmup", bytes(1));
    // a pid that cannot be running: above the largest pid Linux and macOS hand out
    writeFileSync(join(dir, `${libEntryName("k")}.lock`), "99999999\n");
    const t0 = Date.now();
    expect(Buffer.from(c.getOrBuild("k", () => bytes(8)))).toEqual(Buffer.from(bytes(8)));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(readdirSync(dir).filter((n) => n.endsWith(".lock"))).toEqual([]);
  });

  it("clears entries but keeps the secret", () => {
    const c = cache();
    c.put("a", bytes(10));
    c.put("b", bytes(10));
    const s = secret();
    expect(c.clear()).toBe(2);
    expect(c.info().entries).toBe(0);
    expect(secret()).toEqual(s);
    expect(c.get("a")).toBeUndefined();
  });
});

describe("tampering: a bad entry is discarded with its reason, never returned", () => {
  // Each case edits the stored file of key "victim" (a valid 4 KiB entry) and names the reason.
  const cases: { name: string; reason: LibDiscardReason; edit: (file: Buffer) => Buffer }[] = [
    {
      name: "a flipped byte in the body",
      reason: "mac",
      edit: (f) => {
        f[f.length - 100]! ^= 0x01;
        return f;
      },
    },
    { name: "a flipped byte in the MAC", reason: "mac", edit: (f) => ((f[f.length - 1]! ^= 1), f) },
    {
      name: "truncated in the body",
      reason: "truncated",
      edit: (f) => f.subarray(0, f.length - 200),
    },
    { name: "truncated in the header", reason: "truncated", edit: (f) => f.subarray(0, 20) },
    { name: "truncated to the magic", reason: "truncated", edit: (f) => f.subarray(0, 10) },
    { name: "an empty file", reason: "truncated", edit: (f) => f.subarray(0, 0) },
    {
      name: "trailing bytes",
      reason: "trailing-bytes",
      edit: (f) => Buffer.concat([f, Buffer.from("more")]),
    },
    {
      name: "the key text changed (same length)",
      reason: "foreign",
      edit: (f) => {
        f[16] = "V".charCodeAt(0);
        return f;
      },
    },
    {
      name: "a stale format version",
      reason: "stale",
      edit: (f) => {
        f.writeUInt32LE(LIB_FORMAT_VERSION + 1, 8);
        return f;
      },
    },
    { name: "garbage", reason: "header-garbage", edit: () => Buffer.from("#!/bin/sh\necho hi\n") },
    {
      name: "a body length that lies",
      reason: "truncated",
      edit: (f) => {
        f.writeBigUInt64LE(1n << 40n, 16 + "victim".length);
        return f;
      },
    },
  ];

  for (const c of cases) {
    it(`${c.name} → ${c.reason}`, () => {
      cache().put("victim", bytes(4096));
      const p = entryPath("victim");
      writeFileSync(p, c.edit(readFileSync(p)));
      const r = cache();
      expect(r.get("victim")).toBeUndefined();
      expect(r.info().discarded[c.reason]).toBe(1);
      expect(existsSync(p)).toBe(false);
      let built = 0;
      const got = r.getOrBuild("victim", () => (built++, bytes(4096, 9)));
      expect(built).toBe(1);
      expect(Buffer.from(got)).toEqual(Buffer.from(bytes(4096, 9)));
      expect(Buffer.from(cache().get("victim")!)).toEqual(Buffer.from(bytes(4096, 9)));
    });
  }

  it("an entry renamed to another key's name is foreign", () => {
    const c = cache();
    c.put("a", bytes(100, 1));
    c.put("b", bytes(100, 2));
    copyFileSync(entryPath("a"), entryPath("b"));
    const r = cache();
    expect(r.get("b")).toBeUndefined();
    expect(r.info().discarded.foreign).toBe(1);
    expect(Buffer.from(r.get("a")!)).toEqual(Buffer.from(bytes(100, 1)));
  });

  it("an entry given another key's text and name, MAC'd for its own key, never serves", () => {
    // What an attacker holding an old, valid entry for key "a" can do: put it under "b"'s name
    // with its header edited to say "b" (same length). The MAC covers the key it is read for.
    const c = cache();
    c.put("a", bytes(100, 1));
    const f = readFileSync(entryPath("a"));
    f[16] = "b".charCodeAt(0);
    writeFileSync(entryPath("b"), f);
    const r = cache();
    expect(r.get("b")).toBeUndefined();
    expect(r.info().discarded.mac).toBe(1);
  });

  it("swapped bodies with every checksum an attacker can recompute fail the MAC", () => {
    const c = cache();
    const a = bytes(300, 1);
    const b = bytes(300, 2);
    c.put("a", a);
    c.put("b", b);
    // The attacker has no secret: they can rebuild the header and recompute SHA-256s, or an
    // HMAC under a key of their own, but not the store's MAC.
    const guesses = [
      createHash("sha256").update(b).digest(),
      createHmac("sha256", randomBytes(32)).update(b).digest(),
      createHmac("sha256", Buffer.alloc(32)).update(b).digest(),
    ];
    for (const g of guesses) {
      const good = readFileSync(entryPath("a"));
      const forged = Buffer.from(good);
      forged.set(b, forged.length - 32 - 300);
      g.copy(forged, forged.length - 32);
      writeFileSync(entryPath("a"), forged);
      const r = cache();
      expect(r.get("a")).toBeUndefined();
      expect(r.info().discarded.mac).toBe(1);
      c.put("a", a);
    }
    expect(Buffer.from(cache().get("a")!)).toEqual(Buffer.from(a));
  });

  it("an entry encoded under another secret (another user's, a guessed one) fails the MAC", () => {
    cache().put("warmup", bytes(1));
    writeFileSync(entryPath("k"), encodeLibEntry(randomBytes(32), "k", bytes(200)));
    const r = cache();
    expect(r.get("k")).toBeUndefined();
    expect(r.info().discarded.mac).toBe(1);
    // and the format's own decoder agrees with the right secret only
    const good = encodeLibEntry(secret(), "k", bytes(200));
    expect(decodeLibEntry(secret(), "k", good).ok).toBe(true);
    expect(decodeLibEntry(randomBytes(32), "k", good)).toMatchObject({ ok: false, reason: "mac" });
    expect(decodeLibEntry(secret(), "k2", good)).toMatchObject({ ok: false, reason: "foreign" });
  });
});

// A planted library's constructor runs the moment anything dlopens it, so its marker file is
// proof that planted bytes reached the loader.
describe.runIf(haveCompiler || ci)("planted libraries never load", () => {
  let addon: NativeAddon;
  let good: Uint8Array;
  let planted: Uint8Array;
  let marker: string;
  let work: string;

  beforeEach(() => {
    const a = buildNativeAddon({ runtimeSources: [join(fixtures, "runtime_standin.c")] });
    if ("error" in a) throw new Error(a.error);
    addon = a;
    work = mkdtempSync(join(tmpdir(), "kiln-planted-"));
    marker = join(work, "PLANTED-CODE-RAN");
    const lib = (body: string) =>
      '#include "kiln_rt.h"\n#include <stdio.h>\n' +
      body +
      "static const char* const n[] = {0};\nstatic const void* const f[] = {0};\n" +
      "KILN_EXPORT const KilnLibrary kiln_library_v1 = {KILN_ABI_VERSION, 0, n, f, 0};\n";
    const plant =
      `static void mark(void) { FILE* m = fopen(${JSON.stringify(marker)}, "w"); ` +
      "if (m) fclose(m); }\n__attribute__((constructor)) static void planted(void) { mark(); }\n";
    const r = compileSharedObjects([
      { source: lib(""), out: join(work, "good.so") },
      { source: lib(plant), out: join(work, "planted.so") },
    ]);
    expect(r.map((x) => x.ok), r.map((x) => x.stderr).join("\n")).toEqual([true, true]);
    good = readFileSync(join(work, "good.so"));
    planted = readFileSync(join(work, "planted.so"));
    return () => rmSync(work, { recursive: true, force: true });
  });

  it("the marker works: loading the planted bytes directly would leave it", () => {
    // A control in a throwaway copy: proves the marker is a real witness. Loaded under a
    // different marker path so the real tests' marker stays meaningful.
    const controlMarker = join(work, "CONTROL");
    const patched = Buffer.from(planted);
    const at = patched.indexOf(Buffer.from(marker));
    expect(at).toBeGreaterThan(0);
    Buffer.from(controlMarker.padEnd(marker.length, "_").slice(0, marker.length)).copy(patched, at);
    addon.loadLibrary(patched);
    expect(readdirSync(work).some((n) => n.startsWith("CONTROL"))).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });

  const plantings: { name: string; file: (key: string) => Buffer }[] = [
    { name: "the raw shared object", file: () => Buffer.from(planted) },
    {
      name: "a store-format entry with a correct SHA-256 in place of the MAC",
      file: (key) => {
        const e = encodeLibEntry(Buffer.alloc(32), key, planted);
        createHash("sha256").update(planted).digest().copy(e, e.length - 32);
        return e;
      },
    },
    {
      name: "a store-format entry with a SHA-256 over header and body",
      file: (key) => {
        const e = encodeLibEntry(Buffer.alloc(32), key, planted);
        createHash("sha256").update(e.subarray(0, e.length - 32)).digest().copy(e, e.length - 32);
        return e;
      },
    },
    {
      name: "a program-cache entry (KILNPROG, MAC'd under a random secret)",
      file: (key) => encodeEntry(randomBytes(32), key, new Uint8Array(0), planted),
    },
    {
      name: "an entry MAC'd under a random secret",
      file: (key) => encodeLibEntry(randomBytes(32), key, planted),
    },
  ];

  for (const p of plantings) {
    it(`${p.name}`, () => {
      const key = `lib ${p.name}`;
      cache().put("warmup", new Uint8Array(1)); // the directory and secret exist
      writeFileSync(entryPath(key), p.file(key), { mode: 0o600 });
      const c = cache();
      expect(c.get(key)).toBeUndefined();
      const got = c.getOrBuild(key, () => good);
      expect(Buffer.from(got).equals(Buffer.from(good))).toBe(true);
      const lib = addon.loadLibrary(got);
      expect(lib.names).toEqual([]);
      expect(existsSync(marker)).toBe(false);
      // and again from the rebuilt entry
      addon.loadLibrary(cache().get(key)!);
      expect(existsSync(marker)).toBe(false);
      expect(Object.values(c.info().discarded).reduce((s, n) => s + n, 0)).toBe(1);
    });
  }
});

describe("trust: the store is used only when the user alone can write it", () => {
  it("a directory writable by others is not used: a warning, memory only", () => {
    cache().put("k", bytes(64));
    chmodSync(dir, 0o777);
    const c = cache();
    expect(c.get("k")).toBeUndefined();
    const info = c.info();
    expect(info.trusted).toBe(false);
    expect(info.why).toMatch(/writable by group or others \(mode 0777\)/);
    expect(info.why).toContain(dir);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(dir);
    expect(warnings[0]).toMatch(/not used: .*writable by group or others/);
    let builds = 0;
    const build = () => (builds++, bytes(32, 3));
    c.getOrBuild("m", build);
    c.getOrBuild("m", build);
    expect(builds).toBe(1);
    expect(existsSync(entryPath("m"))).toBe(false);
    c.put("n", bytes(8));
    expect(existsSync(entryPath("n"))).toBe(false);
    expect(warnings).toHaveLength(1);
  });

  it("a group-writable directory is not used", () => {
    mkdirSync(dir, { mode: 0o700 });
    chmodSync(dir, 0o720);
    const c = cache();
    expect(c.info()).toMatchObject({ trusted: false });
    expect(c.info().why).toMatch(/mode 0720/);
  });

  it("a directory that is a symbolic link is not used", () => {
    const real = join(root, "real");
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, dir);
    const c = cache();
    expect(c.info().trusted).toBe(false);
    expect(c.info().why).toMatch(/symbolic link/);
  });

  it.runIf(isRoot)("a directory owned by another user is not used", () => {
    cache().put("k", bytes(64));
    chownSync(dir, 65534, 65534);
    const c = cache();
    expect(c.get("k")).toBeUndefined();
    expect(c.info().why).toMatch(/owned by uid 65534, not by uid 0/);
  });

  it("a secret readable by others, or a symbolic link, is refused", () => {
    cache().put("k", bytes(64));
    chmodSync(join(dir, "secret"), 0o644);
    const c = cache();
    expect(c.get("k")).toBeUndefined();
    expect(c.info().why).toMatch(/secret .*readable or writable by group or others \(mode 0644\)/);
    chmodSync(join(dir, "secret"), 0o600);
    const s = secret();
    unlinkSync(join(dir, "secret"));
    writeFileSync(join(root, "elsewhere"), s, { mode: 0o600 });
    symlinkSync(join(root, "elsewhere"), join(dir, "secret"));
    const d = cache();
    expect(d.get("k")).toBeUndefined();
    expect(d.info().why).toMatch(/secret .*symbolic link/);
  });

  it.runIf(isRoot)("a secret owned by another user is refused", () => {
    cache().put("k", bytes(64));
    chownSync(join(dir, "secret"), 65534, 65534);
    expect(cache().info().why).toMatch(/secret .*owned by uid 65534/);
  });

  it("a damaged secret is refused, not replaced behind the user's back", () => {
    cache().put("k", bytes(64));
    writeFileSync(join(dir, "secret"), Buffer.alloc(7), { mode: 0o600 });
    utimesSync(join(dir, "secret"), new Date(0), new Date(0));
    const c = cache();
    expect(c.get("k")).toBeUndefined();
    expect(c.info().why).toMatch(/secret .* is 7 bytes, not 32/);
  });

  it("an entry file writable by others, or a symbolic link, is discarded as untrusted", () => {
    const c = cache();
    c.put("k", bytes(64));
    chmodSync(entryPath("k"), 0o666);
    const r = cache();
    expect(r.get("k")).toBeUndefined();
    expect(r.info().discarded.untrusted).toBe(1);
    expect(r.info().trusted).toBe(true);
    expect(warnings.some((w) => w.includes(entryPath("k")) && /writable by group/.test(w))).toBe(
      true,
    );
    c.put("j", bytes(64));
    const target = join(root, "target");
    copyFileSync(entryPath("j"), target);
    unlinkSync(entryPath("j"));
    symlinkSync(target, entryPath("j"));
    const s = cache();
    expect(s.get("j")).toBeUndefined();
    expect(s.info().discarded.untrusted).toBe(1);
  });

  it.runIf(isRoot)("an entry file owned by another user is discarded as untrusted", () => {
    cache().put("k", bytes(64));
    chownSync(entryPath("k"), 65534, 65534);
    const r = cache();
    expect(r.get("k")).toBeUndefined();
    expect(r.info().discarded.untrusted).toBe(1);
  });

  it("concurrent first uses agree on one secret (created complete, atomically)", () => {
    const stores = Array.from({ length: 4 }, () => cache());
    stores[0]!.put("k", bytes(64));
    for (const s of stores) expect(s.get("k")).toBeDefined();
    expect(readdirSync(dir).filter((n) => n.startsWith(".secret"))).toEqual([]);
  });
});

describe("recency and the byte budget", () => {
  it("a hit refreshes the mtime; a filesystem that refuses it still serves", () => {
    cache().put("k", bytes(64));
    const before = statSync(entryPath("k")).mtimeMs;
    cache().get("k");
    expect(statSync(entryPath("k")).mtimeMs).toBeGreaterThan(before);

    const erofs = Object.assign(new Error("EROFS: read-only file system, futimes"), {
      code: "EROFS",
    });
    let refused = 0;
    const ro = cache({
      touch: () => {
        refused++;
        throw erofs;
      },
    });
    for (let i = 0; i < 3; i++) expect(Buffer.from(ro.get("k")!)).toEqual(Buffer.from(bytes(64)));
    expect(refused).toBe(3);
    expect(ro.info().trusted).toBe(true);
    ro.put("k2", bytes(32));
    expect(ro.get("k2")).toBeDefined();
    const eperm = cache({
      touch: () => {
        throw Object.assign(new Error("EPERM"), { code: "EPERM" });
      },
    });
    expect(eperm.get("k")).toBeDefined();
    expect(eperm.get("k2")).toBeDefined();
    expect(warnings).toEqual([]);
  });

  it.runIf(!isRoot)("a read-only directory still serves its valid entries", () => {
    cache().put("k", bytes(64));
    chmodSync(dir, 0o500);
    const c = cache();
    expect(c.get("k")).toBeDefined();
    c.put("new", bytes(8));
    expect(c.get("new")).toBeDefined(); // from memory
    expect(c.get("k")).toBeDefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/cannot write/);
  });

  it("evicts the least recently used entries after a write", () => {
    const probe = cache();
    probe.put("size", bytes(10_000));
    const size = probe.info().bytes;
    probe.clear();
    const c = cache({ maxBytes: Math.floor(3.5 * size) });
    c.put("a", bytes(10_000, 1));
    c.put("b", bytes(10_000, 2));
    c.put("c", bytes(10_000, 3));
    expect(c.get("a")).toBeDefined(); // a is now more recent than b
    c.put("d", bytes(10_000, 4));
    expect(c.get("b")).toBeUndefined();
    for (const k of ["a", "c", "d"]) expect(c.get(k), k).toBeDefined();
    expect(c.info().entries).toBe(3);
    expect(c.info().bytes).toBeLessThanOrEqual(Math.floor(3.5 * size));
    // an entry bigger than the whole budget is kept until the next write
    const tiny = cache({ maxBytes: 100 });
    tiny.put("big", bytes(10_000));
    expect(tiny.get("big")).toBeDefined();
    expect(tiny.info().entries).toBe(1);
  });

  it("a write sweeps the temp files and locks of dead writers, never a live one's", () => {
    const c = cache();
    c.put("first", bytes(100));
    const name = libEntryName("x");
    const files = {
      oldTemp: `.${name}.123.0123456789abcdef.tmp`,
      freshTemp: `.${name}.124.0123456789abcdef.tmp`,
      oldSecretTemp: ".secret.125.0123456789abcdef.tmp",
      staleLock: `${name}.lock`,
      other: "notes.txt",
    };
    for (const f of Object.values(files)) writeFileSync(join(dir, f), "x");
    const old = (Date.now() - 12 * 60 * 1000) / 1000; // past both the temp and the lock ages
    for (const f of [files.oldTemp, files.oldSecretTemp, files.staleLock, files.other]) {
      utimesSync(join(dir, f), old, old);
    }
    c.put("second", bytes(100));
    const left = readdirSync(dir);
    expect(left).not.toContain(files.oldTemp);
    expect(left).not.toContain(files.oldSecretTemp);
    expect(left).not.toContain(files.staleLock);
    expect(left).toContain(files.freshTemp); // a writer may still be at work on it
    expect(left).toContain(files.other); // not the cache's
    expect(c.get("first")).toBeDefined();
  });
});

describe("processes racing", () => {
  const worker = join(fixtures, "libcache_race_worker.ts");
  const run = (args: readonly string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve, reject) => {
      const p = spawn(process.execPath, ["--import", "tsx", worker, ...args], {
        cwd: repoRoot,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      p.stdout.on("data", (d: Buffer) => (out += d.toString()));
      p.stderr.on("data", (d: Buffer) => (err += d.toString()));
      p.on("error", reject);
      p.on("close", (code) => resolve({ code, out, err }));
    });

  async function race(mode: string, iterations: number, maxBytes: number) {
    const barrier = join(root, `barrier-${mode}`);
    mkdirSync(barrier);
    const results = await Promise.all(
      [0, 1, 2, 3].map((id) =>
        run([dir, barrier, String(id), "4", mode, String(iterations), String(maxBytes)]),
      ),
    );
    const parsed = results.map((r) => {
      expect(r.code, `${r.out}\n${r.err}`).toBe(0);
      return JSON.parse(r.out.trim().split("\n").pop()!) as {
        hits: number;
        misses: number;
        problems: string[];
      };
    });
    for (const p of parsed) expect(p.problems).toEqual([]);
    const names = readdirSync(dir);
    expect(names.filter((n) => n.endsWith(".tmp") || n.endsWith(".lock"))).toEqual([]);
    return { parsed, barrier, names };
  }

  it("4 processes writing one key never corrupt it", async () => {
    const { parsed, names } = await race("same", 40, 1024 ** 3);
    for (const p of parsed) expect(p.hits).toBe(40);
    expect(names.filter((n) => n.endsWith(".klib"))).toHaveLength(1);
    expect(cache().get("shared")).toBeDefined();
  }, 120_000);

  it("4 processes writing different keys under eviction pressure never corrupt one", async () => {
    // A budget of about two entries: every write evicts someone's entry.
    const { parsed } = await race("different", 30, 2 * 200 * 1024);
    expect(parsed.reduce((s, p) => s + p.hits, 0)).toBeGreaterThan(0);
  }, 120_000);

  it("4 processes asking for one missing library build it once", async () => {
    const { barrier } = await race("lock", 1, 1024 ** 3);
    expect(readFileSync(join(barrier, "builds"), "utf8").trim().split("\n")).toHaveLength(1);
  }, 120_000);
});
