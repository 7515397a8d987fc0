// The corpus as golden files: each module of test/ir/corpus/models.ts, built with the builder,
// must print exactly as its checked-in `.hlo` file (KILN_UPDATE_GOLDEN=1 rewrites them), survive
// the text and proto round trips unchanged with the same fingerprint, pass the verifier, and
// evaluate to what its plain-JS reference computes.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { evaluate, expectLiteral } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";
import { CORPUS } from "./corpus/models.ts";

const GOLDEN_DIR = join(import.meta.dirname, "corpus");
const UPDATE = process.env["KILN_UPDATE_GOLDEN"] === "1";

describe.each(Object.entries(CORPUS))("corpus module %s", (name, entry) => {
  const module = entry.build();
  const text = printHlo(module);
  const golden = join(GOLDEN_DIR, `${name}.hlo`);

  it("prints exactly as its golden file", () => {
    if (UPDATE || !existsSync(golden)) {
      if (!UPDATE) throw new Error(`missing ${golden}; run npm run golden:update`);
      writeFileSync(golden, text);
    }
    expect(text).toBe(readFileSync(golden, "utf8"));
  });

  it("round-trips through the text form", () => {
    const parsed = parseHlo(readFileSync(golden, "utf8"));
    verifyModule(parsed);
    expect(printHlo(parsed)).toBe(text);
    expect(fingerprint(parsed)).toBe(fingerprint(module));
  });

  it("round-trips through the proto form", () => {
    const back = moduleFromProto(moduleToProto(module));
    verifyModule(back);
    expect(printHlo(back)).toBe(text);
    expect(fingerprint(back)).toBe(fingerprint(module));
  });

  it("evaluates to its plain-JS reference", () => {
    const inputs = entry.inputs();
    const out = expectLiteral(evaluate(module, inputs));
    expect(out.dims).toEqual(entry.outputDims);
    const want = entry.reference(inputs);
    const got = out.toNumbers();
    expect(got.length).toBe(want.length);
    got.forEach((g, i) => {
      const w = want[i]!;
      if (Math.abs(g - w) > 1e-5 * Math.max(1, Math.abs(w))) {
        throw new Error(`${name}: element ${i} is ${g}, reference ${w}`);
      }
    });
  });

  it("evaluates the same after the text round trip", () => {
    const inputs = entry.inputs();
    const a = expectLiteral(evaluate(module, inputs));
    const b = expectLiteral(evaluate(parseHlo(text), inputs));
    expect(Array.from(b.data as Float32Array)).toEqual(Array.from(a.data as Float32Array));
  });
});

describe("fingerprint", () => {
  it("ignores what XLA writes as a default: default layouts and a compare's default type", () => {
    const kiln = `HloModule m

ENTRY %main (x: f32[2,3], i: s32[2,3]) -> (pred[2,3], pred[2,3]) {
  %x = f32[2,3] parameter(0)
  %i = s32[2,3] parameter(1)
  %a = pred[2,3] compare(f32[2,3] %x, f32[2,3] %x), direction=LT
  %b = pred[2,3] compare(s32[2,3] %i, s32[2,3] %i), direction=GE
  ROOT %t = (pred[2,3], pred[2,3]) tuple(%a, %b)
}
`;
    const xla = kiln
      .replaceAll("[2,3] ", "[2,3]{1,0} ")
      .replace("direction=LT", "direction=LT, type=FLOAT")
      .replace("direction=GE", "direction=GE, type=SIGNED");
    expect(xla).not.toBe(kiln);
    expect(fingerprint(parseHlo(xla))).toBe(fingerprint(parseHlo(kiln)));
    // What is not a default still counts: another layout, another comparison type.
    const transposed = kiln.replace("%x = f32[2,3] parameter", "%x = f32[2,3]{0,1} parameter");
    expect(fingerprint(parseHlo(transposed))).not.toBe(fingerprint(parseHlo(kiln)));
    const total = kiln.replace("direction=LT", "direction=LT, type=TOTALORDER");
    expect(fingerprint(parseHlo(total))).not.toBe(fingerprint(parseHlo(kiln)));
    // Printing keeps what the module holds; only the fingerprint's text leaves defaults out.
    expect(printHlo(parseHlo(xla))).toContain("type=SIGNED");
  });

  it("ignores instruction and computation names and metadata", () => {
    const text = printHlo(CORPUS["softmax"]!.build());
    const renamed = text
      .replace(/(?<![\w.])x(?![\w.])/g, "input_tensor")
      .replaceAll("max_f32", "reduce_max_fn")
      .replaceAll('source_line=20', "source_line=99");
    expect(renamed).not.toBe(text);
    expect(fingerprint(parseHlo(renamed))).toBe(fingerprint(parseHlo(text)));
  });

  it("changes when the computation changes", () => {
    const text = printHlo(CORPUS["softmax"]!.build());
    const changed = text.replace(" exponential(", " tanh(");
    expect(changed).not.toBe(text);
    expect(fingerprint(parseHlo(changed))).not.toBe(fingerprint(parseHlo(text)));
    const otherShape = text.replaceAll("f32[4,10]", "f32[4,11]");
    expect(fingerprint(parseHlo(otherShape))).not.toBe(fingerprint(parseHlo(text)));
  });

  it("differs between the corpus modules and is a 64-digit hex string", () => {
    const prints = Object.values(CORPUS).map((e) => fingerprint(e.build()));
    expect(new Set(prints).size).toBe(prints.length);
    for (const p of prints) expect(p).toMatch(/^[0-9a-f]{64}$/);
  });
});
