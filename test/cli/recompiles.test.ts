// The recompile gate: `kiln recompiles` rows say what each call ran as (compiled, cache hit,
// replay, eager fallback); calls that did not run a compiled program fail the gate unless
// --allow-fallback; specialization reasons are printed; --json keeps stdout pure JSON even when
// the model prints. Also the small CLI items: `run` names what its second call was, a missing
// --shapes file says so, a misspelt zoo name gets a did-you-mean, no `((defaults))`.

import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-gate-cache-"));

function kiln(...args: string[]) {
  const r = spawnSync(process.execPath, ["cli/kiln.js", ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Row {
  call: number;
  kind: string;
  compiled: boolean;
  reason: string;
  specializations: string[];
}

const BREAKS = "test/cli/fixtures/breaks_fn.ts";
const LIMIT = "test/cli/fixtures/limit_fn.ts";
const SIZES = "test/cli/fixtures/size_branch_fn.ts";

describe("kiln recompiles: the gate", () => {
  it("replay mode fails the gate, even at 0 compiles under --max; --json stays JSON", () => {
    const r = kiln("recompiles", BREAKS, "--shapes", "batch=1..3", "--max", "5", "--json");
    expect(r.code, r.stderr).toBe(1);
    const j = JSON.parse(r.stdout) as Record<string, unknown>;
    // The model's console.log went to stderr, not into the JSON.
    expect(r.stderr).toContain("clipped: a line the model prints");
    expect(j["compiles"]).toBe(0);
    expect(j["ok"]).toBe(false);
    expect(j["mode"]).toBe("replay");
    expect(j["failures"]).toEqual([expect.stringMatching(/^3 call\(s\) ran in replay mode/)]);
    const rows = j["rows"] as Row[];
    expect(rows.map((x) => x.kind)).toEqual(["replay", "replay", "replay"]);
    expect(rows[0]!.reason).toMatch(/^runs in replay mode: .*breaks_fn\.ts:8:\d+: graph break/);
    expect(rows.every((x) => !x.compiled)).toBe(true);
  });

  it("--allow-fallback accepts replay; the table says replay, not '-'", () => {
    const r = kiln("recompiles", BREAKS, "--shapes", "batch=1..2", "--allow-fallback");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ call {2}spec {5}result {10}reason$/);
    expect(lines[1]).toMatch(/^ {4}1 {2}batch=1 {2}replay {10}runs in replay mode: /);
    expect(lines[2]).toBe("    2  batch=2  replay");
    expect(lines.at(-1)).toBe(
      "2 calls, 0 compiles (0 recompiles), mode replay, 2 replay + 0 eager fallback call(s): " +
        "allowed (--allow-fallback)",
    );
  });

  it("eager fallback past the recompile limit is its own row kind and fails the gate", () => {
    const r = kiln("recompiles", LIMIT, "--shapes", "batch=1;batch=1;batch=2;batch=3");
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[1]).toMatch(/^ {4}1 {2}batch=1 {2}compiled {8}first call$/);
    expect(lines[2]).toBe("    2  batch=1  cache hit");
    expect(lines[3]).toMatch(
      /^ {4}3 {2}batch=2 {2}eager fallback {2}past the recompile limit: x\.shape\[0\] was 1, now 2/,
    );
    expect(lines[4]).toMatch(/^ {4}4 {2}batch=3 {2}eager fallback/);
    expect(lines.at(-1)).toBe(
      "4 calls, 1 compiles (0 recompiles), mode graph, 0 replay + 2 eager fallback call(s): " +
        "FAIL (--allow-fallback accepts them)",
    );
    const ok = kiln("recompiles", LIMIT, "--shapes", "batch=1;batch=2", "--allow-fallback",
      "--max", "1");
    expect(ok.code, ok.stderr).toBe(0);
  });

  it("prints specialization reasons under the call's row", () => {
    const r = kiln("recompiles", SIZES, "--shapes", "batch=2..3");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[2]).toMatch(/^ {4}2 {2}batch=3 {2}compiled {8}x\.shape\[0\] was 2, now 3/);
    expect(lines[3]).toMatch(
      /^ {32}x\.shape\[0\] = 3 is specialized: kept static: the code branches on a size at test\/cli\/fixtures\/size_branch_fn\.ts:7:\d+/,
    );
    const j = JSON.parse(kiln("recompiles", SIZES, "--shapes", "batch=2..3", "--json").stdout);
    expect((j.rows as Row[])[1]!.specializations).toEqual([
      expect.stringMatching(/kept static: the code branches on a size at .*size_branch_fn\.ts:7:/),
    ]);
  });
});

describe("kiln: the small things", () => {
  it("run names what its calls were: replay is not 'compiled'", () => {
    const r = kiln("run", BREAKS);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${BREAKS} (defaults): replay mode, 0 compile(s)`);
    expect(r.stdout).toMatch(/second call \(replay mode: the JavaScript ran again\): +[\d.]+ ms/);
    expect(r.stdout).not.toContain("(compiled)");
    expect(r.stdout).not.toContain("((defaults))");
    const mlp = kiln("run", "mlp");
    expect(mlp.stdout).toContain("mlp (defaults): graph mode, 1 compile(s)");
    expect(mlp.stdout).toMatch(/second call \(compiled, cache hit\): +[\d.]+ ms/);
  });

  it("a missing --shapes file is reported as not found", () => {
    const r = kiln("recompiles", "mlp", "--shapes", "no/such/shapes.txt");
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(
      "kiln recompiles: --shapes 'no/such/shapes.txt': no such file " +
        "(specs are written name=value, e.g. seq=1..8)",
    );
  });

  it("a misspelt zoo name gets a did-you-mean and the zoo's names", () => {
    const r = kiln("explain", "gpt3");
    expect(r.code).toBe(3);
    expect(r.stderr.trim()).toBe(
      "kiln explain: 'gpt3' is neither a zoo model nor a file; did you mean 'gpt2'? " +
        "(zoo models: mlp, resnet, bert, gpt2, vit, whisper)",
    );
  });

  it("a misspelt key in a model file's compileOptions is the file's error", () => {
    for (const cmd of ["recompiles", "run", "explain"]) {
      const args = cmd === "recompiles" ? ["--shapes", "batch=1"] : [];
      const r = kiln(cmd, "test/cli/fixtures/bad_options_fn.ts", ...args);
      expect(r.code, cmd).toBe(3);
      expect(r.stderr.trim()).toMatch(new RegExp(
        `^kiln ${cmd}: 'test/cli/fixtures/bad_options_fn\\.ts': compileOptions: compile: no ` +
          "option 'recompileLimt'; did you mean 'recompileLimit'\\?",
      ));
    }
  });
});
