// The browser build (scripts/build_browser.ts): the bundle is one ES module with no Node import
// and none of the native backend, and it RUNS where there is no Node global at all — a fresh V8
// context (test/browser/fixtures/run_bundle.mjs) with only web globals: compile() in graph mode
// with eager's values on wasm, the static size-branch oracle, replay mode for a free variable
// it cannot read, memory-only caching, and GPT-2 tiny's greedy tokens from safetensors bytes
// equal to what the Node library computes from the same file. The page itself runs in Chromium
// in browser.test.ts.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSafetensors, noGrad, readSafetensors, tensor } from "../../index.ts";
import { GPT2 } from "../../models/gpt2.ts";
import { KILN_VERSION } from "../../runtime/cache.ts";
import { buildBrowser, type BrowserBuild } from "../../scripts/build_browser.ts";
import { makeWeights } from "../../examples/browser/make_weights.ts";
import { sha256 } from "../../util/sha256.ts";

const PROMPT = [5, 17, 42, 8];
const NEW_TOKENS = 12;

let dir: string;
let built: BrowserBuild;
let code: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kiln-browser-"));
  built = await buildBrowser(join(dir, "dist"));
  code = readFileSync(built.file, "utf8");
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the bundle", () => {
  it("imports nothing: no node: module, no require, no dynamic import of a module", () => {
    expect(code).not.toMatch(/\bfrom\s*["']node:/);
    expect(code).not.toMatch(/\bimport\s*\(\s*["']node:/);
    expect(code).not.toMatch(/\brequire\s*\(\s*["']node:/);
    // Not one import statement at all: everything is inside.
    expect(code).not.toMatch(/^\s*import\s.*\sfrom\s*["']/m);
  });

  it("has none of the native backend, only its browser stand-in", () => {
    const native = built.inputs.filter((p) => p.includes("runtime/native/"));
    expect(native).toEqual(["runtime/native/backend.browser.ts"]);
    for (const gone of ["kiln_rt", "nativeBackend", "libcache", "toolchain.ts", "registerBackend(nativeBackend"]) {
      expect(code, gone).not.toContain(gone);
    }
    // Every module with a browser variant was swapped for it.
    for (const swapped of ["runtime/cache_disk", "util/hash", "compiler/analyze_host",
      "compiler/node_builtins", "compiler/ts_morph", "tensor/safetensors_fs", "passes/dump_fs",
      "runtime/index"]) {
      expect(built.inputs).toContain(`${swapped}.browser.ts`);
      expect(built.inputs).not.toContain(`${swapped}.ts`);
    }
  });

  it("runs compile() where there is no Node global, with Node's tokens for GPT-2 tiny", () => {
    const weights = makeWeights(join(dir, "gpt2-tiny.safetensors"));
    const out = execFileSync(process.execPath, [
      "--experimental-vm-modules", "--no-warnings",
      join(import.meta.dirname, "fixtures/run_bundle.mjs"),
      built.file, weights, PROMPT.join(","), String(NEW_TOKENS),
    ], { encoding: "utf8", timeout: 120_000 });
    const r = JSON.parse(out) as {
      globals: string[];
      fn: { mode: string; compiles: number; hits: number; diffs: number[]; backend: string;
        specialized: string[] };
      free: { first: number[]; second: number[]; mode: string; reasons: string[] };
      userModule: { mode: string; compiles: number; hits: number };
      gpt2: { tokens: number[]; mode: string; compiles: number; recompiles: string[] };
      backends: string[];
      analysis: string;
      cache: { kilnVersion: string; memory: boolean; disk: boolean; memoryEntries: number };
      dirError: string;
    };
    expect(r.globals).toEqual(["undefined", "undefined", "undefined", "undefined"]);
    expect(r.backends).toEqual(["wasm", "js", "interpreter"]);
    expect(r.analysis).toBe("inline: the browser build has no worker threads it could wait on");
    // A pure function: graph mode on wasm (the default there), exactly eager's values; the
    // static oracle keeps each size static and says why.
    expect(r.fn).toMatchObject({ mode: "graph", compiles: 2, hits: 1, backend: "wasm" });
    expect(r.fn.diffs).toEqual([0, 0, 0]);
    expect(r.fn.specialized[0]).toBe("x.shape[0] = 4 is specialized: kept static: whether the " +
      "code branches on a size is not checked here (no node:inspector: node:inspector is not " +
      "available here)");
    // A closure variable cannot be read (no inspector), so it is not baked in: replay mode.
    expect(r.free).toEqual({
      first: [2, 2], second: [3, 3], mode: "replay",
      reasons: ["reads the free variable `scale`, which compile() cannot read here to guard " +
        "(node:inspector is not available here)"],
    });
    expect(r.userModule).toEqual({ mode: "graph", compiles: 1, hits: 1 });
    // GPT-2 (Kiln's own class: its module-level names are trusted, library.test.ts): graph
    // mode, prompt and step programs, the tokens Node computes from the same bytes.
    const file = readFileSync(weights);
    const { metadata } = readSafetensors(new Uint8Array(file));
    const model = new GPT2(JSON.parse(metadata!["kiln.config"]!)).eval();
    model.loadStateDict(loadSafetensors(new Uint8Array(file)));
    const ids = tensor([PROMPT.map(BigInt)]);
    const node = noGrad(() => model.generate(ids, { maxNewTokens: NEW_TOKENS, staticCache: true }));
    const want = (node.toArray() as number[][])[0]!.map(Number);
    expect(new Set(want.slice(PROMPT.length)).size).toBeGreaterThan(3);
    expect(r.gpt2.tokens).toEqual(want);
    expect(r.gpt2).toMatchObject({ mode: "graph", compiles: 2 });
    expect(r.gpt2.recompiles).toEqual([
      "inputIds.shape[1] was 4, now 1: dim 1 of inputIds is now dynamic (size 1 is specialized " +
        "(sizes 0 and 1 always are))",
    ]);
    // Memory-only caching; a directory is refused with the reason.
    // The same version and build id as Node's keys (the same sources), memory-only caching.
    expect(r.cache).toMatchObject({ kilnVersion: KILN_VERSION, memory: true, disk: false });
    expect(r.cache.memoryEntries).toBeGreaterThan(0);
    expect(r.dirError).toContain("the browser build has no file system");
  }, 180_000);
});

it("the browser's SHA-256 gives node:crypto's digests (fingerprints agree)", () => {
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 70_000]) {
    const b = new Uint8Array(n + 3).map((_, i) => (i * 31 + 7) & 255).subarray(3);
    expect(sha256(b), `${n} bytes`).toBe(createHash("sha256").update(b).digest("hex"));
  }
  const text = "ENTRY main.3 { p = f32[2]{0} parameter(0) } — é 日本";
  expect(sha256(text)).toBe(createHash("sha256").update(text).digest("hex"));
});

it("runtime/index.browser.ts exports what runtime/index.ts does, less the native backend's", async () => {
  const node = Object.keys(await import("../../runtime/index.ts")).sort();
  const browser = Object.keys(await import("../../runtime/index.browser.ts")).sort();
  const native = ["nativeBackend", "nativeProfile", "nativeStatus", "nativeThreads",
    "setNativeThreads", "withNativeThreads"];
  expect(browser).toEqual(node.filter((k) => !native.includes(k)));
  for (const k of native) expect(node, k).toContain(k);
});

