// The `kiln` CLI end to end: each command run as a child process (`node cli/kiln.js`, exactly
// what the npm bin runs) on tiny zoo models and fixture model files, checking exit codes, the
// JSON outputs against the evaluator-backed IR and against eager runs, and the one-line errors
// for bad input. The program cache goes to a private temporary KILN_CACHE_DIR.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromMessage, moduleFromProto } from "../../ir/proto.ts";
import { HloModuleProtoSchema } from "../../ir/proto/gen/hlo_pb.ts";
import { Tensor } from "../../index.ts";
import createMLP, { inputs as mlpInputs } from "../../models/mlp.ts";

const root = new URL("../../", import.meta.url).pathname;
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-cli-cache-"));

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function kiln(...args: string[]): Result {
  const r = spawnSync(process.execPath, ["cli/kiln.js", ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function json(r: Result): Record<string, unknown> {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

/** A bad-input run: the exit code, and exactly one line on stderr with no stack. */
function oneLineError(r: Result, code: number): string {
  expect(r.code).toBe(code);
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

describe("kiln --help", () => {
  it("documents the commands, exit codes and environment", () => {
    const r = kiln("--help");
    expect(r.code).toBe(0);
    for (const c of ["explain", "dump", "run", "recompiles", "cache"]) {
      expect(r.stdout).toContain(c);
    }
    for (const v of ["KILN_LOGS", "KILN_DUMP_DIR", "KILN_CACHE_DIR", "Exit codes"]) {
      expect(r.stdout).toContain(v);
    }
    const sub = kiln("dump", "--help");
    expect(sub.code).toBe(0);
    expect(sub.stdout).toContain("--stage");
    expect(sub.stdout).toContain("Exit codes");
  });
});

describe("kiln explain", () => {
  it("reports graphs, guards and the fusion summary (text and JSON)", () => {
    const text = kiln("explain", "gpt2", "--shape", "batch=1,seq=4");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^explain\(GPT2\): graph mode/);
    expect(text.stdout).toContain("inputIds.shape == [1, 4]");
    expect(text.stdout).toMatch(/fusion \(optimized program\): \d+ kernels/);
    const j = json(kiln("explain", "mlp", "--shape", "batch=3", "--json"));
    expect(j["mode"]).toBe("graph");
    expect(j["graphs"]).toBe(1);
    const guards = j["guards"] as { kind: string; path: string; expected: unknown; text: string }[];
    expect(guards.map((g) => g.text)).toContain("x.shape == [3, 16]");
    expect(guards.find((g) => g.kind === "shape" && g.path === "x")?.expected).toEqual([
      3, 16,
    ]);
    const fusion = j["fusion"] as { kernels: number; list: unknown[] };
    expect(fusion.kernels).toBe(fusion.list.length);
    expect(fusion.kernels).toBeGreaterThan(0);
  });
});

describe("kiln dump", () => {
  it("writes hlo, json and proto forms of the same modules", () => {
    const hloDir = mkdtempSync(join(tmpdir(), "kiln-dump-"));
    const r = kiln("dump", "mlp", "--stage", "all", "--out", hloDir);
    expect(r.code, r.stderr).toBe(0);
    const files = readdirSync(hloDir).sort();
    expect(files[0]).toBe("000-captured.hlo");
    expect(files.at(-1)).toMatch(/-optimized\.hlo$/);
    expect(files.some((f) => f.includes("fuse-"))).toBe(true);
    const texts = files.map((f) => readFileSync(join(hloDir, f), "utf8"));
    // The captured program carries the user's source line on each op.
    expect(texts[0]).toContain('source_file="models/mlp.ts"');
    for (const t of texts) expect(printHlo(parseHlo(t))).toBe(t);

    const protoDir = mkdtempSync(join(tmpdir(), "kiln-dump-"));
    expect(kiln("dump", "mlp", "--stage", "all", "--format", "proto", "--out", protoDir).code).toBe(
      0,
    );
    const protos = readdirSync(protoDir).sort();
    expect(protos.map((f) => f.replace(/\.pb$/, ".hlo"))).toEqual(files);
    for (const [i, f] of protos.entries()) {
      const m = moduleFromProto(new Uint8Array(readFileSync(join(protoDir, f))));
      expect(printHlo(m)).toBe(texts[i]);
    }

    const j = json(kiln("dump", "mlp", "--format", "json", "--stage", "all"));
    const stages = j["stages"] as { stage: string; module: unknown }[];
    expect(stages.map((s) => s.stage)).toEqual(files.map((f) => f.slice(4, -4)));
    for (const [i, s] of stages.entries()) {
      const m = moduleFromMessage(fromJson(HloModuleProtoSchema, s.module as never));
      expect(printHlo(m)).toBe(texts[i]);
    }
  });

  it("--pass selects per-pass snapshots; stdout gets hlo text", () => {
    const r = kiln("dump", "mlp", "--pass", "^fuse-");
    expect(r.code, r.stderr).toBe(0);
    const headers = r.stdout.split("\n").filter((l) => l.startsWith("// ---- "));
    expect(headers.length).toBeGreaterThan(0);
    for (const h of headers) expect(h).toMatch(/^\/\/ ---- fuse-/);
    const captured = kiln("dump", "mlp", "--stage", "captured");
    expect(captured.stdout).toMatch(/^HloModule MLP/);
    expect(captured.stdout).not.toContain("fusion(");
  });
});

describe("kiln run", () => {
  it("prints an output summary that matches an eager run", () => {
    const j = json(kiln("run", "mlp", "--shape", "batch=3", "--json"));
    const outs = j["outputs"] as { path: string; shape: number[]; min: number; max: number }[];
    expect(outs).toHaveLength(1);
    const eager = createMLP("tiny").eval().call(...mlpInputs({ batch: 3 }));
    expect(eager).toBeInstanceOf(Tensor);
    const values = ((eager as Tensor).toArray() as number[][]).flat();
    expect(outs[0]!.shape).toEqual([3, 10]);
    expect(outs[0]!.min).toBeCloseTo(Math.min(...values), 4);
    expect(outs[0]!.max).toBeCloseTo(Math.max(...values), 4);
    expect(j["compiles"]).toBe(1);
  });

  it("runs a plain-function model file with inputs and compileOptions", () => {
    const r = kiln("run", "test/cli/fixtures/scale_fn.ts", "--shape", "batch=4,width=5");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("output: float32[4, 5]");
    expect(r.stdout).toContain("graph mode, 1 compile(s)");
  });
});

describe("kiln recompiles", () => {
  it("counts compiles per call and fails exactly above --max", () => {
    const shapes = join(mkdtempSync(join(tmpdir(), "kiln-shapes-")), "shapes.txt");
    writeFileSync(shapes, "# three sizes\nbatch=1..3\n");
    const fn = "test/cli/fixtures/scale_fn.ts";
    const j = json(kiln("recompiles", fn, "--shapes", shapes, "--json"));
    const rows = j["rows"] as { call: number; compiled: boolean; reason: string }[];
    expect(rows.map((r) => r.call)).toEqual([1, 2, 3]);
    // compileOptions { dynamic: false }: every new batch size compiles its own program.
    expect(rows.every((r) => r.compiled)).toBe(true);
    expect(rows[0]!.reason).toBe("first call");
    expect(rows[1]!.reason).toContain("x.shape[0] was 1, now 2");
    expect(j["compiles"]).toBe(3);
    expect(kiln("recompiles", "test/cli/fixtures/scale_fn.ts", "--shapes", shapes, "--max", "3")
      .code).toBe(0);
    const fail = kiln("recompiles", "test/cli/fixtures/scale_fn.ts", "--shapes", "batch=1..3",
      "--max", "2");
    expect(fail.code).toBe(1);
    expect(fail.stdout.trimEnd().split("\n").at(-1)).toBe(
      "3 calls, 3 compiles (2 recompiles), mode graph, max 2: FAIL",
    );
  });

  it("stays in budget on a zoo model whose shapes repeat", () => {
    const j = json(kiln("recompiles", "mlp", "--shapes", "batch=2;batch=2;batch=2", "--json",
      "--max", "1"));
    expect(j["ok"]).toBe(true);
    expect(j["compiles"]).toBe(1);
    expect(j["calls"]).toBe(3);
  });
});

describe("kiln bench", () => {
  it("times eager, lazy and compiled per backend", () => {
    const j = json(kiln("bench", "mlp", "--backends", "js,interpreter", "--iterations", "2",
      "--json"));
    const rows = j["rows"] as { backend: string; mode: string; compileMs?: number;
      medianMs: number; minMs: number; maxMs: number; peakRssBytes: number }[];
    expect(rows.map((r) => `${r.backend}/${r.mode}`)).toEqual([
      "js/eager", "js/lazy", "js/compiled",
      "interpreter/eager", "interpreter/lazy", "interpreter/compiled",
    ]);
    for (const r of rows) {
      expect(r.minMs).toBeLessThanOrEqual(r.medianMs);
      expect(r.medianMs).toBeLessThanOrEqual(r.maxMs);
      expect(r.peakRssBytes).toBeGreaterThan(0);
      expect(r.compileMs !== undefined).toBe(r.mode === "compiled");
    }
    expect(oneLineError(kiln("bench", "mlp", "--backends", "nope"), 2)).toContain(
      "unknown backend 'nope'",
    );
  });
});

describe("kiln cache", () => {
  it("lists, describes and clears the disk cache", () => {
    expect(kiln("run", "mlp").code).toBe(0);
    const info = json(kiln("cache", "info", "--json"));
    expect(info["dir"]).toBe(join(cacheDir, "programs"));
    expect(info["diskEntries"] as number).toBeGreaterThan(0);
    const ls = json(kiln("cache", "ls", "--json")) as unknown as { file: string }[];
    expect(ls.length).toBe(info["diskEntries"]);
    const cleared = json(kiln("cache", "clear", "--json"));
    expect(cleared["disk"]).toBe(ls.length);
    expect((json(kiln("cache", "info", "--json"))["diskEntries"])).toBe(0);
  });
});

describe("bad input: one line, non-zero exit", () => {
  it("missing file", () => {
    expect(oneLineError(kiln("run", "no/such/model.ts"), 3)).toBe(
      "kiln run: model file 'no/such/model.ts' not found",
    );
  });

  it("file without a default export", () => {
    expect(oneLineError(kiln("explain", "test/cli/fixtures/no_default.ts"), 3)).toContain(
      "has no default export",
    );
  });

  it("a model that throws, and the stack only with --verbose", () => {
    const line = oneLineError(kiln("run", "test/cli/fixtures/throws.ts"), 4);
    expect(line).toContain("threw while running");
    expect(line).toContain("broken model: refusing to run");
    const verbose = kiln("run", "test/cli/fixtures/throws.ts", "--verbose");
    expect(verbose.code).toBe(4);
    expect(verbose.stderr).toMatch(/\n\s+at /);
  });

  it("bad --shape", () => {
    expect(oneLineError(kiln("run", "mlp", "--shape", "batch=two"), 2)).toBe(
      "kiln run: bad size spec 'batch=two': 'two' is not a positive integer",
    );
    expect(oneLineError(kiln("run", "mlp", "--shape", "heads=2"), 4)).toContain(
      "unknown size 'heads'",
    );
  });

  it("unknown pass", () => {
    expect(oneLineError(kiln("dump", "mlp", "--pass", "no-such-pass"), 2)).toContain(
      "--pass 'no-such-pass' matches no pass (passes: dynamic-padder, simplify",
    );
  });

  it("unwritable --out", () => {
    const file = join(mkdtempSync(join(tmpdir(), "kiln-out-")), "a-file");
    writeFileSync(file, "");
    expect(oneLineError(kiln("dump", "mlp", "--out", join(file, "sub")), 5)).toContain(
      "is not writable: ENOTDIR",
    );
  });

  // Node's recursive mkdir used to spin forever under /proc: the short spawn timeout turns a
  // regression into a failure (status null) instead of a hung suite.
  it("--out under /proc or /sys", () => {
    for (const [dir, fsRoot] of [["/proc/kiln-out", "/proc"], ["/sys/kiln-out/sub", "/sys"]]) {
      const r = spawnSync(process.execPath, ["cli/kiln.js", "dump", "mlp", "--out", dir], {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
        timeout: 20_000,
      });
      const line = oneLineError({ code: r.status, stdout: r.stdout, stderr: r.stderr }, 5);
      expect(line).toBe(
        `kiln dump: --out '${dir}' is not writable: it is under ${fsRoot} ` +
          "(a kernel pseudo-filesystem), choose another directory",
      );
    }
  }, 45_000);
});
