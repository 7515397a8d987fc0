// `kiln export`: the captured program written as an HLO proto or text file reads back (proto
// reader, text parser) as the program `kiln dump --stage captured` shows, and verifies; a bad
// --format is a usage error and an unwritable --out an output error.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { capture, requireGraph } from "../../cli/capture.ts";
import { EXIT } from "../../cli/errors.ts";
import { loadModel } from "../../cli/load.ts";
import { main } from "../../cli/main.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { parseHlo } from "../../ir/parse.ts";
import { moduleFromProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";

const dir = mkdtempSync(join(tmpdir(), "kiln-export-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, (s) => out.push(s), (s) => err.push(s));
  return { code, out, err };
}

describe("kiln export", () => {
  it("writes the captured program as proto and as text, both reading back the same", async () => {
    const model = await loadModel("mlp", "tiny");
    const want = fingerprint(requireGraph(model, capture(model, undefined, "interpreter")));
    const pb = join(dir, "mlp.pb");
    const hlo = join(dir, "mlp.hlo");
    const a = await run(["export", "mlp", "--format", "hlo-proto", "--out", pb]);
    expect(a.code).toBe(EXIT.ok);
    expect(a.out.join("\n")).toMatch(/mlp\.pb: hlo-proto, 7 entry parameters/);
    const b = await run(["export", "mlp", "--format", "hlo-text", "--out", hlo]);
    expect(b.code).toBe(EXIT.ok);
    const fromProto = moduleFromProto(readFileSync(pb));
    const fromText = parseHlo(readFileSync(hlo, "utf8"));
    verifyModule(fromProto);
    verifyModule(fromText);
    expect(fingerprint(fromProto)).toBe(want);
    expect(fingerprint(fromText)).toBe(want);
  });

  it("rejects a bad --format and reports an unwritable --out", async () => {
    const bad = await run(["export", "mlp", "--format", "onnx", "--out", join(dir, "x")]);
    expect(bad.code).toBe(EXIT.usage);
    const io = await run(["export", "mlp", "--out", join(dir, "missing", "dir", "m.pb")]);
    expect(io.code).toBe(EXIT.io);
    expect(io.err.join("\n")).toMatch(/kiln export: cannot write '.*m\.pb'/);
  });
});
