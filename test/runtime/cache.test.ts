// The program cache (runtime/cache.ts, runtime/cache_disk.ts), always in fresh temp dirs: memory
// and disk hits with compile counts, every kind of bad entry (damaged, truncated, foreign, stale,
// garbage) discarded and recompiled without its bytes ever reaching a backend, two processes
// racing on one entry, LRU eviction within a byte budget, disk off, an unwritable directory, the
// listing and clearing the CLI uses, and KILN_LOGS=cache. A fresh ProgramCache over a populated
// directory stands in for a new process, except in the race test, which uses real ones.

import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { type Literal, literalsIdentical } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape } from "../../ir/shape.ts";
import { interpreterBackend } from "../../runtime/interpreter.ts";
import {
  defaultProgramCache,
  defaultProgramDir,
  kilnCacheRoot,
  KILN_VERSION,
  optionsHash,
  ProgramCache,
  type ProgramCacheOptions,
  setDefaultProgramCache,
} from "../../runtime/cache.ts";
import {
  decodeEntry,
  encodeEntry,
  entryFileName,
  FORMAT_VERSION,
  type ProgramKey,
} from "../../runtime/cache_disk.ts";
import { setLogTopics } from "../../util/log.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { FakeBackend, type FakeExecutable } from "./fixtures/fake_backend.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-cache-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function corpus(name: string): Module {
  return CORPUS[name]!.build();
}

/** A small module whose fingerprint depends on `c`: x + c over f32[8]. */
function tiny(c: number): Module {
  const mb = new ModuleBuilder(`tiny_${c}`);
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [8]), "x");
    return b.add(x, b.broadcast(b.scalar("f32", c), [8], []));
  });
  return mb.build();
}

function cache(opts: ProgramCacheOptions = {}): ProgramCache {
  return new ProgramCache({ disk: dir, onWarning: () => {}, ...opts });
}

function entryPath(c: ProgramCache, module: Module): string {
  return join(dir, entryFileName(c.keyFor(module, new FakeBackend())));
}

function entryFiles(d = dir): string[] {
  return existsSync(d) ? readdirSync(d).filter((n) => n.endsWith(".kprog")).sort() : [];
}

function sameResult(a: EvalValue, b: EvalValue): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameResult(x, b[i]!));
  }
  return literalsIdentical(a as Literal, b as Literal);
}

/** Where the body of an entry file starts (after the variable-length key and body length). */
function bodyStart(bytes: Buffer): number {
  return 16 + bytes.readUInt32LE(12) + 8;
}

const prepare = (m: Module): Module => cloneModule(m);

/**
 * Writes an entry, damages its file with `damage`, then checks that a fresh
 * cache discards it for `reason` and recompiles without deserializing anything, and that the
 * file left behind is a valid entry again.
 */
function expectDiscarded(damage: (file: string) => void, reason: string): void {
  const module = corpus("mlp");
  const first = cache();
  first.clear();
  // `prepare` makes a new module, so the entry's body holds a module proto and a payload
  expect(first.getOrCompile(module, new FakeBackend(), {}, prepare).hit).toBe("miss");
  const file = entryPath(first, module);
  damage(file);

  const fake = new FakeBackend();
  const fresh = cache();
  const r = fresh.getOrCompile(module, fake, {}, prepare);
  expect(r.hit).toBe("miss");
  expect(fake.deserialized).toHaveLength(0);
  expect(fake.compiles).toBe(1);
  expect(fresh.stats.discarded).toBe(1);
  expect(fresh.stats.discardReasons).toMatchObject({ [reason]: 1 });
  // the bad file was replaced by the recompiled program's entry
  const again = new FakeBackend();
  expect(cache().getOrCompile(module, again, {}, prepare).hit).toBe("disk");
  expect(again.compiles).toBe(0);
}

describe("memory cache", () => {
  it("hits on the same module, backend and options, and returns the same executable", () => {
    const fake = new FakeBackend();
    const c = cache({ disk: false });
    const m = corpus("softmax");
    const a = c.getOrCompile(m, fake, { fuse: true, level: 2 });
    const b = c.getOrCompile(m, fake, { level: 2, fuse: true });
    expect([a.hit, b.hit]).toEqual(["miss", "memory"]);
    expect(b.executable).toBe(a.executable);
    expect(b.key).toBe(a.key);
    expect(fake.compiles).toBe(1);
    // a module equal in content (rebuilt from scratch) shares the entry
    expect(c.getOrCompile(corpus("softmax"), fake, { fuse: true, level: 2 }).hit).toBe("memory");
    expect(c.stats).toMatchObject({ memoryHits: 2, misses: 1, diskHits: 0 });
  });

  it("misses when the options, the module or the backend differ", () => {
    const fake = new FakeBackend();
    const c = cache({ disk: false });
    const m = corpus("softmax");
    c.getOrCompile(m, fake, { fuse: true });
    expect(c.getOrCompile(m, fake, { fuse: false }).hit).toBe("miss");
    expect(c.getOrCompile(m, fake).hit).toBe("miss");
    expect(c.getOrCompile(corpus("layer_norm"), fake, { fuse: true }).hit).toBe("miss");
    expect(c.getOrCompile(m, interpreterBackend, { fuse: true }).hit).toBe("miss");
    expect(c.getOrCompile(m, "interpreter", { fuse: true }).hit).toBe("memory");
    expect(fake.compiles).toBe(4);
  });

  it("keeps the most recently used maxMemoryEntries executables", () => {
    const fake = new FakeBackend();
    const c = cache({ disk: false, maxMemoryEntries: 2 });
    const [a, b, d] = [tiny(1), tiny(2), tiny(3)];
    c.getOrCompile(a, fake);
    c.getOrCompile(b, fake);
    expect(c.getOrCompile(a, fake).hit).toBe("memory"); // a is now the most recent
    c.getOrCompile(d, fake); // drops b
    expect(c.stats.memoryEvictions).toBe(1);
    expect(c.getOrCompile(a, fake).hit).toBe("memory");
    expect(c.getOrCompile(b, fake).hit).toBe("miss");
  });

  it("memory: false recompiles every time when the disk is off too", () => {
    const fake = new FakeBackend();
    const c = cache({ memory: false, disk: false });
    const m = tiny(1);
    expect([c.getOrCompile(m, fake).hit, c.getOrCompile(m, fake).hit]).toEqual(["miss", "miss"]);
    expect(fake.compiles).toBe(2);
  });
});

describe("disk cache", () => {
  it("a fresh cache (a new process) loads the entry without compiling", () => {
    const m = corpus("attention_block");
    const writer = new FakeBackend();
    const first = cache().getOrCompile(m, writer);
    expect(first.hit).toBe("miss");
    expect(entryFiles()).toHaveLength(1);

    const reader = new FakeBackend();
    const fresh = cache();
    const r = fresh.getOrCompile(m, reader);
    expect(r.hit).toBe("disk");
    expect(r.key).toBe(first.key);
    expect(reader.compiles).toBe(0);
    expect(reader.deserialized).toHaveLength(1);
    expect(Buffer.from(reader.deserialized[0]!).toString()).toBe(
      (first.executable as FakeExecutable).source,
    );
    expect(fresh.stats).toMatchObject({ diskHits: 1, misses: 0, discarded: 0 });
    // compiled from the key's module itself: the entry stores no module, the caller's is used
    expect(r.executable.module).toBe(m);
    // the loaded program computes what the module means
    const inputs = CORPUS["attention_block"]!.inputs();
    expect(sameResult(r.executable.run(inputs), evaluate(m, inputs))).toBe(true);
    // and is kept in memory afterwards
    expect(fresh.getOrCompile(m, reader).hit).toBe("memory");
  });

  it("keys on the module before `prepare`, and a hit runs neither prepare nor codegen", () => {
    const m = corpus("mlp");
    let prepared = 0;
    // stands in for a pass pipeline: the compiled module differs from the key's module
    const passes = (_: Module): Module => {
      prepared++;
      return corpus("softmax");
    };
    const writer = new FakeBackend();
    const miss = cache().getOrCompile(m, writer, { pipeline: "O2" }, passes);
    expect(miss.executable.module).not.toBe(m);
    expect(prepared).toBe(1);
    const reader = new FakeBackend();
    const hit = cache().getOrCompile(m, reader, { pipeline: "O2" }, passes);
    expect(hit.hit).toBe("disk");
    expect(prepared).toBe(1);
    expect(reader.compiles).toBe(0);
    expect(printHlo(hit.executable.module)).toBe(printHlo(miss.executable.module));
    expect(fingerprint(hit.executable.module)).toBe(fingerprint(corpus("softmax")));
  });

  it("round-trips the interpreter backend and every corpus module, module stored or not", () => {
    for (const prep of [undefined, prepare]) {
      for (const [name, entry] of Object.entries(CORPUS)) {
        const m = entry.build();
        const miss = cache().getOrCompile(m, "interpreter", {}, prep);
        expect(miss.hit, name).toBe("miss");
        const r = cache().getOrCompile(m, "interpreter", {}, prep);
        expect(r.hit, name).toBe("disk");
        if (prep) expect(printHlo(r.executable.module)).toBe(printHlo(miss.executable.module));
        const inputs = entry.inputs();
        expect(sameResult(r.executable.run(inputs), evaluate(m, inputs)), name).toBe(true);
      }
      cache().clear();
    }
  });

  it("discards a damaged payload (one flipped byte) and recompiles", () => {
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes[bytes.length - 40]! ^= 0x01;
      writeFileSync(f, bytes);
    }, "mac");
  });

  it("discards a damaged module proto inside the body", () => {
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes[bodyStart(bytes) + 10]! ^= 0x80;
      writeFileSync(f, bytes);
    }, "mac");
  });

  it("discards a truncated file: mid-body, mid-header, and empty", () => {
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      writeFileSync(f, bytes.subarray(0, (bodyStart(bytes) + bytes.length) >> 1));
    }, "truncated");
    expectDiscarded((f) => writeFileSync(f, readFileSync(f).subarray(0, 30)), "truncated");
    expectDiscarded((f) => writeFileSync(f, readFileSync(f).subarray(0, 5)), "truncated");
    expectDiscarded((f) => writeFileSync(f, Buffer.alloc(0)), "truncated");
  });

  it("discards trailing bytes after the body", () => {
    expectDiscarded((f) => {
      writeFileSync(f, Buffer.concat([readFileSync(f), Buffer.from("extra")]));
    }, "trailing-bytes");
  });

  it("discards a foreign entry (another key's file renamed over this one)", () => {
    const [a, b] = [tiny(1), tiny(2)];
    const first = cache();
    first.getOrCompile(a, new FakeBackend());
    first.getOrCompile(b, new FakeBackend());
    renameSync(entryPath(first, a), entryPath(first, b));

    const fake = new FakeBackend();
    const fresh = cache();
    expect(fresh.getOrCompile(b, fake).hit).toBe("miss");
    expect(fresh.stats.discardReasons.foreign).toBe(1);
    expect(fake.deserialized).toHaveLength(0);
    expect(fake.compiles).toBe(1);
    expect(cache().getOrCompile(b, new FakeBackend()).hit).toBe("disk");
  });

  it("discards a stale entry after a version bump, and after a format bump", () => {
    const m = corpus("layer_norm");
    cache({ kilnVersion: "1.0.0" }).getOrCompile(m, new FakeBackend());

    const fake = new FakeBackend();
    const bumped = cache({ kilnVersion: "1.1.0" });
    expect(bumped.getOrCompile(m, fake).hit).toBe("miss");
    expect(bumped.stats.discardReasons.stale).toBe(1);
    expect(fake.deserialized).toHaveLength(0);
    // the new version's entry replaced the old one
    expect(entryFiles()).toHaveLength(1);
    expect(cache({ kilnVersion: "1.1.0" }).getOrCompile(m, new FakeBackend()).hit).toBe("disk");
    // going back is stale too
    const old = cache({ kilnVersion: "1.0.0" });
    expect(old.getOrCompile(m, new FakeBackend()).hit).toBe("miss");
    expect(old.stats.discardReasons.stale).toBe(1);

    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes.writeUInt32LE(FORMAT_VERSION + 1, 8);
      writeFileSync(f, bytes);
    }, "stale");
  });

  it("discards header garbage: bad magic, random bytes, a key that is not JSON", () => {
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes.write("GARBAGE!", 0, "latin1");
      writeFileSync(f, bytes);
    }, "header-garbage");
    expectDiscarded((f) => {
      const junk = Buffer.alloc(4096);
      for (let i = 0; i < junk.length; i++) junk[i] = (i * 7919 + 13) & 0xff;
      writeFileSync(f, junk);
    }, "header-garbage");
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes.fill("#".charCodeAt(0), 16, 16 + bytes.readUInt32LE(12));
      writeFileSync(f, bytes);
    }, "header-garbage");
    expectDiscarded((f) => {
      const bytes = readFileSync(f);
      bytes.writeUInt32LE(0x7fffffff, 12);
      writeFileSync(f, bytes);
    }, "header-garbage");
  });

  it("discards an entry the backend cannot load even though its bytes are intact", () => {
    const m = tiny(5);
    cache().getOrCompile(m, new FakeBackend());
    class Changed extends FakeBackend {
      override deserialize(): FakeExecutable {
        throw new Error("payload format changed");
      }
    }
    const changed = new Changed();
    const c = cache();
    expect(c.getOrCompile(m, changed).hit).toBe("miss");
    expect(c.stats.discardReasons.undecodable).toBe(1);
    expect(changed.compiles).toBe(1);
  });

  it("detects any single corrupted byte anywhere in an entry, never handing it over", () => {
    const m = tiny(7);
    cache().getOrCompile(m, new FakeBackend(), {}, prepare);
    const file = entryPath(cache(), m);
    const good = readFileSync(file);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: good.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        (at, mask) => {
          const bad = Buffer.from(good);
          bad[at]! ^= mask;
          writeFileSync(file, bad);
          const fake = new FakeBackend();
          const c = cache();
          const r = c.getOrCompile(m, fake, {}, prepare);
          writeFileSync(file, good);
          return r.hit === "miss" && fake.deserialized.length === 0 && c.stats.discarded === 1;
        },
      ),
      { numRuns: 150 },
    );
  });

  it("decodeEntry accepts exactly what encodeEntry wrote for that key", () => {
    const key: ProgramKey = { kiln: "9.9.9", backend: "fake", fingerprint: "ab", options: "cd" };
    const secret = Buffer.alloc(32, 7);
    const bytes = encodeEntry(
      secret,
      JSON.stringify(key),
      Uint8Array.of(1, 2, 3),
      Uint8Array.of(9, 8),
    );
    const d = decodeEntry(secret, bytes, key);
    expect(d.ok).toBe(true);
    if (d.ok) {
      expect([...d.moduleProto]).toEqual([1, 2, 3]);
      expect([...d.payload]).toEqual([9, 8]);
    }
    const other = decodeEntry(secret, bytes, { ...key, options: "ce" });
    expect(other).toMatchObject({ ok: false, reason: "foreign" });
    const forged = decodeEntry(Buffer.alloc(32, 8), bytes, key);
    expect(forged).toMatchObject({ ok: false, reason: "mac" });
  });

  it("two processes racing to write one entry never leave a bad or temp file", async () => {
    const barrier = join(dir, "barrier");
    const cacheDir = join(dir, "entries");
    mkdirSync(barrier);
    const worker = join(here, "fixtures", "cache_race_worker.ts");
    const run = (id: string) =>
      new Promise<{ code: number | null; out: string; err: string }>((resolve, reject) => {
        const p = spawn(
          process.execPath,
          ["--import", "tsx", worker, cacheDir, barrier, id, "60"],
          { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] },
        );
        let out = "";
        let err = "";
        p.stdout.on("data", (d: Buffer) => (out += d.toString()));
        p.stderr.on("data", (d: Buffer) => (err += d.toString()));
        p.on("error", reject);
        p.on("close", (code) => resolve({ code, out, err }));
      });
    const results = await Promise.all([run("a"), run("b")]);
    for (const r of results) {
      expect(r.err + r.out).not.toMatch(/"problems":\["/);
      expect(r.code, r.err).toBe(0);
    }
    const names = readdirSync(cacheDir);
    expect(names.filter((n) => n.endsWith(".tmp"))).toEqual([]);
    expect(names.filter((n) => n.endsWith(".kprog"))).toHaveLength(1);
    const m = corpus("attention_block");
    const reader = new FakeBackend();
    const c = new ProgramCache({ disk: cacheDir, memory: false });
    for (let i = 0; i < 3; i++) expect(c.getOrCompile(m, reader).hit).toBe("disk");
    expect(reader.compiles).toBe(0);
    const source = Buffer.from(reader.deserialized[0]!).toString();
    expect(source).toMatch(/:writer-[ab]:x{262144}$/);
  }, 120_000);

  it("evicts the least recently used entries to stay within maxBytes", () => {
    const [a, b, c, d] = [tiny(1), tiny(2), tiny(3), tiny(4)];
    const probe = new ProgramCache({ disk: join(dir, "probe"), onWarning: () => {} });
    probe.getOrCompile(a, new FakeBackend("t", 10_000));
    const size = probe.info().diskBytes;
    expect(size).toBeGreaterThan(10_000);

    const maxBytes = Math.floor(3.5 * size);
    const fake = new FakeBackend("t", 10_000);
    const use = (m: Module) => cache({ memory: false, maxBytes }).getOrCompile(m, fake);
    const present = () => [a, b, c, d].map((m) => existsSync(entryPath(probe, m).replace(
      join(dir, "probe"), dir)));

    use(a);
    use(b);
    use(c);
    expect(use(a).hit).toBe("disk"); // a is now more recent than b
    const evicting = cache({ memory: false, maxBytes });
    evicting.getOrCompile(d, fake);
    expect(evicting.stats.evictions).toBe(1);
    expect(present()).toEqual([true, false, true, true]);
    expect(evicting.info().diskBytes).toBeLessThanOrEqual(maxBytes);
    // b comes back as a miss and pushes out c, now the least recently used
    expect(use(b).hit).toBe("miss");
    expect(present()).toEqual([true, true, false, true]);
  });

  it("does not write an entry bigger than the whole budget", () => {
    const c = cache({ maxBytes: 1000 });
    c.getOrCompile(tiny(1), new FakeBackend("t", 5000));
    expect(entryFiles()).toEqual([]);
    expect(c.stats.writes).toBe(0);
  });

  it("with disk off writes nothing anywhere", () => {
    const saved = process.env["KILN_CACHE_DIR"];
    process.env["KILN_CACHE_DIR"] = dir;
    try {
      const fake = new FakeBackend();
      const c = new ProgramCache({ disk: false });
      c.getOrCompile(corpus("mlp"), fake);
      expect(readdirSync(dir)).toEqual([]);
      expect(c.info()).toMatchObject({ disk: false, dir: undefined, diskEntries: 0 });
      expect(c.entries()).toEqual([]);
      // and with the disk on, the same setting puts entries under $KILN_CACHE_DIR/programs
      const on = new ProgramCache();
      on.getOrCompile(corpus("mlp"), fake);
      expect(on.info().dir).toBe(join(dir, "programs"));
      expect(entryFiles(join(dir, "programs"))).toHaveLength(1);
    } finally {
      if (saved === undefined) delete process.env["KILN_CACHE_DIR"];
      else process.env["KILN_CACHE_DIR"] = saved;
    }
  });

  it("an unwritable directory warns once and falls back to memory", () => {
    const blocker = join(dir, "a-file");
    writeFileSync(blocker, "not a directory");
    const warnings: string[] = [];
    const onWarning = (w: string) => warnings.push(w);
    const c = new ProgramCache({ disk: join(blocker, "cache"), onWarning });
    const fake = new FakeBackend();
    expect(c.getOrCompile(tiny(1), fake).hit).toBe("miss");
    expect(c.getOrCompile(tiny(2), fake).hit).toBe("miss");
    expect(c.getOrCompile(tiny(1), fake).hit).toBe("memory");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(join(blocker, "cache"));
    expect(warnings[0]).toMatch(/ENOTDIR|EEXIST/);
    expect(warnings[0]).toContain("memory only");
    expect(c.info()).toMatchObject({ disk: false });
    expect(c.info().diskDisabled).toMatch(/^not trusted: the directory cannot be created/);
  });

  it("a backend without serialize/deserialize is cached in memory only", () => {
    const compileOnly = {
      name: "compile-only",
      priority: -100,
      compiles: 0,
      compile(module: Module) {
        this.compiles++;
        return interpreterBackend.compile(module);
      },
    };
    const c = cache();
    c.getOrCompile(tiny(1), compileOnly);
    expect(entryFiles()).toEqual([]);
    expect(c.getOrCompile(tiny(1), compileOnly).hit).toBe("memory");
    expect(cache().getOrCompile(tiny(1), compileOnly).hit).toBe("miss");
    expect(compileOnly.compiles).toBe(2);
  });
});

describe("listing, clearing, info", () => {
  it("entries() lists keys, most recent first, and flags bad headers", () => {
    const c = cache();
    const [a, b] = [tiny(1), tiny(2)];
    c.getOrCompile(a, new FakeBackend());
    c.getOrCompile(b, new FakeBackend());
    writeFileSync(join(dir, "README.txt"), "not ours");
    let list = c.entries();
    expect(list.map((e) => e.key?.fingerprint)).toEqual([fingerprint(b), fingerprint(a)]);
    expect(list.every((e) => e.problem === undefined && e.key?.kiln === KILN_VERSION)).toBe(true);
    expect(list[0]!.bytes).toBeGreaterThan(0);

    writeFileSync(entryPath(c, a), "garbage");
    list = c.entries();
    expect(list.find((e) => e.file === entryPath(c, a))?.problem).toMatch(/^header-garbage/);
    expect(c.info()).toMatchObject({ diskEntries: 2, memoryEntries: 2, disk: true, dir });
  });

  it("clear() empties memory and removes only the cache's own entries", () => {
    const c = cache();
    c.getOrCompile(tiny(1), new FakeBackend());
    c.getOrCompile(tiny(2), new FakeBackend());
    writeFileSync(join(dir, "README.txt"), "not ours");
    expect(c.clear()).toEqual({ memory: 2, disk: 2 });
    expect(readdirSync(dir).sort()).toEqual(["README.txt", "secret"]);
    expect(c.info()).toMatchObject({ diskEntries: 0, memoryEntries: 0 });
  });

  it("put() stores an executable compiled elsewhere, for its own backend only", () => {
    const m = tiny(3);
    const fake = new FakeBackend();
    const exe = fake.compile(m);
    cache().put(m, fake, exe, { o: 1 });
    const reader = new FakeBackend();
    expect(cache().getOrCompile(m, reader, { o: 1 }).hit).toBe("disk");
    expect(reader.compiles).toBe(0);
    expect(() => cache().put(m, interpreterBackend, exe)).toThrow(/backend 'fake'/);
  });

  it("the default cache lives in the user's cache directory", () => {
    expect(kilnCacheRoot({ KILN_CACHE_DIR: "/k", XDG_CACHE_HOME: "/x" })).toBe("/k");
    expect(kilnCacheRoot({ XDG_CACHE_HOME: "/x" })).toBe(join("/x", "kiln"));
    expect(kilnCacheRoot({ XDG_CACHE_HOME: "relative" })).toBe(join(homedir(), ".cache", "kiln"));
    expect(kilnCacheRoot({})).toBe(join(homedir(), ".cache", "kiln"));
    expect(defaultProgramDir({ KILN_CACHE_DIR: "/k" })).toBe(join("/k", "programs"));

    const saved = { ...process.env };
    try {
      process.env["KILN_CACHE_DIR"] = dir;
      process.env["KILN_CACHE_DISK"] = "0";
      setDefaultProgramCache(undefined);
      const d = defaultProgramCache();
      expect(defaultProgramCache()).toBe(d);
      expect(d.info()).toMatchObject({ disk: false, memory: true });
      process.env["KILN_CACHE_DISK"] = "1";
      setDefaultProgramCache(undefined);
      const info = defaultProgramCache().info();
      expect(info).toMatchObject({ disk: true, dir: join(dir, "programs") });
    } finally {
      process.env = saved;
      setDefaultProgramCache(undefined);
    }
  });
});

describe("options hashing", () => {
  it("is stable under key order and drops undefined members", () => {
    expect(optionsHash({ a: 1, b: { c: [1, 2], d: "x" } })).toBe(
      optionsHash({ b: { d: "x", c: [1, 2] }, a: 1 }),
    );
    expect(optionsHash({ a: 1, b: undefined })).toBe(optionsHash({ a: 1 }));
  });

  it("tells apart values that JSON would conflate", () => {
    const distinct = [{}, { a: 0 }, { a: -0 }, { a: "0" }, { a: 0n }, { a: null }, { a: NaN },
      { a: [] }, { a: {} }, { a: [undefined] }, { a: [null] }, { a: true }, { a: "true" }];
    expect(new Set(distinct.map((o) => optionsHash(o))).size).toBe(distinct.length);
  });

  it("rejects what is not plain data, naming the option", () => {
    expect(() => optionsHash({ passes: { fn: () => 1 } })).toThrow(/'passes\.fn' is a function/);
    expect(() => optionsHash({ m: new Map() })).toThrow(/'m' is a Map instance/);
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    expect(() => optionsHash({ c: cyclic })).toThrow(/'c\.self' is cyclic/);
  });
});

describe("KILN_LOGS=cache", () => {
  it("logs misses, hits and discards with the reason", () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => {
      lines.push(String(chunk));
      return true;
    });
    setLogTopics(["cache"]);
    try {
      const m = tiny(9);
      const c = cache();
      c.getOrCompile(m, new FakeBackend());
      c.getOrCompile(m, new FakeBackend());
      cache().getOrCompile(m, new FakeBackend());
      const f = entryPath(c, m);
      const bytes = readFileSync(f);
      bytes[bytes.length - 1]! ^= 0xff;
      writeFileSync(f, bytes);
      cache().getOrCompile(m, new FakeBackend());
    } finally {
      setLogTopics(undefined);
      spy.mockRestore();
    }
    const text = lines.join("");
    expect(text).toMatch(/\[kiln:cache\] miss fake [0-9a-f]{12}/);
    expect(text).toMatch(/\[kiln:cache\] write .*\.kprog/);
    expect(text).toMatch(/\[kiln:cache\] hit memory fake/);
    expect(text).toMatch(/\[kiln:cache\] hit disk fake/);
    expect(text).toMatch(/\[kiln:cache\] discard .*\.kprog: mac: /);
  });
});
