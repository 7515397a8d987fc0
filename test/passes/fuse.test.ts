// Fusion: kernel counts (tinygrad style) for softmax, layer norm, RMS norm, a GELU MLP and the
// corpus attention block; golden dumps of the fused modules; the fusion contract
// (FUSION_CONTRACT.md) checked on every fusion made; the evaluator's results BIT-IDENTICAL
// before and after fusion on the corpus and on random elementwise/reduce/dot graphs with NaN,
// ±inf and -0 inputs; and the negative cases with the reasons explainFusion gives.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { Literal, literal, literalsIdentical } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { OPCODE_INFO } from "../../ir/opcodes.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { arrayShape, type ArrayShape, sameDims } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import {
  describeRecord,
  explainFusion,
  formatFusionSummary,
  fuseElementwise,
  fuseOutput,
  fuseReductions,
  type FusionPass,
  fusionPasses,
  fusionSummary,
} from "../../passes/fuse.ts";
import { MAX_FUSION_SIZE } from "../../passes/fuse_rules.ts";
import { setLogTopics } from "../../util/log.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { buildGeluMlp, buildRmsNorm, buildTransformer, inputsFor } from "./fusion_models.ts";

const GOLDEN_DIR = join(import.meta.dirname, "golden_fusion");
const UPDATE = process.env["KILN_UPDATE_GOLDEN"] === "1";

function fuse(m: Module, passes: FusionPass[] = fusionPasses()): Module {
  for (const p of passes) {
    p.run(m);
    verifyModule(m);
  }
  return m;
}

function sameValue(a: EvalValue, b: EvalValue): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
      a.every((x, i) => sameValue(x, b[i]!));
  }
  return literalsIdentical(a, b);
}

// ---- the fusion contract, restated independently of the pass ------------------------------

const LOOP_OPS = new Set([
  "broadcast", "reshape", "transpose", "slice", "concatenate", "pad", "reverse", "iota",
  "constant", "dynamic-slice", "parameter",
]);
const isLoopOp = (i: Instruction) =>
  LOOP_OPS.has(i.opcode) || (OPCODE_INFO[i.opcode].elementwise && i.opcode !== "bitcast-convert");
const dimsOf = (i: Instruction) => (i.shape as ArrayShape).dims;
const nonUnit = (d: readonly number[]) => d.filter((x) => x !== 1).join(",");

function checkContract(module: Module): void {
  for (const f of module.allInstructions()) {
    if (f.opcode !== "fusion") continue;
    const body: Computation = f.called[0]!;
    const where = `%${f.name} (${f.attrs.fusionKind}) calls %${body.name}`;
    expect(body.parameters.length, where).toBe(f.operands.length);
    expect(body.root.shape.kind, where).toBe("array");
    const ops = body.instructions;
    switch (f.attrs.fusionKind) {
      case "kLoop":
        for (const i of ops) expect(isLoopOp(i), `${where}: %${i.name}`).toBe(true);
        break;
      case "kInput": {
        const reduces = ops.filter((i) => i.opcode === "reduce");
        expect(reduces.length, where).toBeGreaterThan(0);
        const row = reduces[0]!.operand(0).shape as ArrayShape;
        const dims = reduces[0]!.attrs.dimensions;
        for (const r of reduces) {
          expect(sameDims(r.operand(0).shape as ArrayShape, row), where).toBe(true);
          expect(r.attrs.dimensions, where).toEqual(dims);
        }
        for (const i of ops) {
          if (i.opcode !== "reduce") expect(isLoopOp(i), `${where}: %${i.name}`).toBe(true);
        }
        const rootDims = dimsOf(body.root);
        const reduced = dimsOf(reduces[0]!);
        expect(
          nonUnit(rootDims) === nonUnit(row.dims) || nonUnit(rootDims) === nonUnit(reduced),
          where,
        ).toBe(true);
        break;
      }
      case "kOutput": {
        const heroes = ops.filter((i) => i.opcode === "dot" || i.opcode === "convolution");
        expect(heroes.length, where).toBe(1);
        const hero = heroes[0]!;
        for (const o of hero.operands) {
          const src = o.opcode === "transpose" || o.opcode === "broadcast" ? o.operand(0) : o;
          expect(src.opcode, `${where}: operand %${o.name}`).toBe("parameter");
        }
        const after = new Set([hero]);
        for (const i of ops) {
          if (!i.operands.some((o) => after.has(o))) continue;
          after.add(i);
          expect(OPCODE_INFO[i.opcode].elementwise, `${where}: %${i.name}`).toBe(true);
          expect(sameDims(i.shape as ArrayShape, hero.shape as ArrayShape)).toBe(true);
        }
        expect(after.has(body.root), where).toBe(true);
        break;
      }
      default:
        throw new Error(`${where}: unexpected fusion kind`);
    }
  }
}

function kernels(m: Module) {
  return fusionSummary(m);
}

// ---- kernel counts ---------------------------------------------------------------------------

describe("kernel counts", () => {
  it("softmax is one kInput kernel", () => {
    const s = kernels(fuse(CORPUS["softmax"]!.build()));
    expect(s.kernels).toBe(1);
    expect(s.byKind.kInput).toBe(1);
    expect(s.list[0]!.fused).toMatch(/^fused_softmax/);
  });

  it("layer norm is one kInput kernel with both reductions and the affine epilogue", () => {
    const m = fuse(CORPUS["layer_norm"]!.build());
    const s = kernels(m);
    expect(s.kernels).toBe(1);
    expect(s.byKind.kInput).toBe(1);
    const body = m.entry.root.called[0]!;
    expect(body.instructions.filter((i) => i.opcode === "reduce")).toHaveLength(2);
    expect(body.root.opcode).toBe("add");
  });

  it("RMS norm is one kInput kernel", () => {
    const s = kernels(fuse(buildRmsNorm()));
    expect(s.kernels).toBe(1);
    expect(s.byKind.kInput).toBe(1);
  });

  it("a GELU MLP is two kOutput kernels with their epilogues", () => {
    const m = fuse(buildGeluMlp());
    const s = kernels(m);
    expect(s.kernels).toBe(2);
    expect(s.byKind.kOutput).toBe(2);
    const bodies = s.list.map((k) => m.getComputation(k.fused!));
    const opcodes = bodies.map((b) => b.instructions.map((i) => i.opcode));
    // fc1: dot, bias add and the whole tanh-form GELU; fc2: dot and bias add.
    expect(opcodes.some((o) => o.includes("tanh") && o.includes("dot"))).toBe(true);
    expect(opcodes.every((o) => o.includes("dot") && o.includes("add"))).toBe(true);
  });

  it("the MLP corpus module is two kOutput kernels", () => {
    const s = kernels(fuse(CORPUS["mlp"]!.build()));
    expect(s.byKind).toMatchObject({ kOutput: 2, kInput: 0, kLoop: 0, unfused: 0 });
  });

  it("the attention block: 3 unfused projections, 3 dot fusions, softmax, one transpose", () => {
    const s = kernels(fuse(CORPUS["attention_block"]!.build()));
    // q/k/v projections stay plain dots (their results are reshaped and transposed, which is
    // not an elementwise epilogue); the scale and the causal mask join the softmax kernel.
    expect(s.byKind).toEqual({ kLoop: 1, kInput: 1, kOutput: 3, kCustom: 0, unfused: 3 });
    expect(s.kernels).toBe(8);
    const softmax = s.list.find((k) => k.kind === "kInput")!;
    expect(softmax.ops).toBe(19);
  });

  it("a conv block fuses bias and ReLU into the convolution", () => {
    const m = fuse(CORPUS["conv_block"]!.build());
    const s = kernels(m);
    expect(s.byKind).toMatchObject({ kOutput: 1, unfused: 1 });
    expect(s.list.find((k) => k.kind === "unfused")!.root).toBe("reduce-window");
  });

  it("a 2-layer transformer stack: 3 norms/softmax kernels and 5 dot fusions per layer", () => {
    const s = kernels(fuse(buildTransformer(2)));
    expect(s.byKind).toEqual({ kLoop: 2, kInput: 6, kOutput: 10, kCustom: 0, unfused: 6 });
  });

  it("splits a long chain after a reduction into fusions of at most MAX_FUSION_SIZE ops", () => {
    const mb = new ModuleBuilder("chain");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [4, 8]), "x");
      const r = b.reduce(x, b.scalar("f32", 0), [1], mb.reducer("add", "f32"));
      // r has a second user, so the chain's kInput fusion cannot take the reduce itself.
      let v = b.broadcast(r, [4, 8], [0]);
      for (let i = 0; i < 600; i++) v = i % 2 ? b.add(v, x) : b.multiply(v, x);
      return b.tuple([v, b.negate(r)]);
    });
    const s = kernels(fuse(mb.build()));
    expect(s.byKind).toEqual({ kLoop: 3, kInput: 0, kOutput: 0, kCustom: 0, unfused: 2 });
    expect(Math.max(...s.list.map((k) => k.ops))).toBe(MAX_FUSION_SIZE);
  });

  it("fusionSummary prints one line per kernel", () => {
    const text = formatFusionSummary(kernels(fuse(CORPUS["mlp"]!.build())));
    expect(text.split("\n")[0]).toBe("2 kernels (kOutput=2)");
    expect(text).toMatch(/kOutput calls=%fused_relu ops=6 root=maximum/);
  });
});

// ---- golden dumps ----------------------------------------------------------------------------

const GOLDEN: Record<string, () => Module> = {
  softmax: () => CORPUS["softmax"]!.build(),
  layer_norm: () => CORPUS["layer_norm"]!.build(),
  gelu_mlp: () => buildGeluMlp(),
  attention_block: () => CORPUS["attention_block"]!.build(),
};

describe.each(Object.entries(GOLDEN))("golden fusion dump of %s", (name, build) => {
  const text = printHlo(fuse(build()));
  const file = join(GOLDEN_DIR, `${name}.hlo`);

  it("matches its checked-in file", () => {
    if (UPDATE) {
      mkdirSync(GOLDEN_DIR, { recursive: true });
      writeFileSync(file, text);
    }
    if (!existsSync(file)) throw new Error(`missing ${file}; run with KILN_UPDATE_GOLDEN=1`);
    expect(text).toBe(readFileSync(file, "utf8"));
  });

  it("parses back, verifies and prints the same, also through the proto form", () => {
    const parsed = parseHlo(readFileSync(file, "utf8"));
    verifyModule(parsed);
    expect(printHlo(parsed)).toBe(text);
    const back = moduleFromProto(moduleToProto(parsed));
    verifyModule(back);
    expect(printHlo(back)).toBe(text);
  });
});

// ---- differential: fused == unfused, bit for bit ---------------------------------------------

/** A copy of `inputs` with NaN, ±inf and ±0 written over some f32 elements. */
function withSpecials(inputs: Literal[]): Literal[] {
  const specials = [NaN, Infinity, -Infinity, -0, 0];
  return inputs.map((l, k) => {
    if (l.type !== "f32") return l;
    const data = Float32Array.from(l.data as Float32Array);
    for (let i = k % 3; i < data.length; i += 5) data[i] = specials[(i + k) % specials.length]!;
    return new Literal("f32", l.dims, data);
  });
}

describe.each(Object.entries(CORPUS))("corpus module %s", (name, entry) => {
  const original = entry.build();
  const fused = fuse(entry.build());

  it("keeps the evaluator's results bit-identical (plain and special inputs)", () => {
    for (const inputs of [entry.inputs(), withSpecials(entry.inputs())]) {
      expect(sameValue(evaluate(fused, inputs), evaluate(original, inputs))).toBe(true);
    }
  });

  it("makes only fusions the contract allows", () => {
    checkContract(fused);
  });

  it("changes nothing when the passes run again", () => {
    const again = printHlo(fused);
    for (const p of fusionPasses()) expect(p.run(fused), `${name}: ${p.name}`).toBe(false);
    expect(printHlo(fused)).toBe(again);
  });
});

describe("differential on built models", () => {
  it.each([
    ["rms_norm", () => buildRmsNorm()],
    ["gelu_mlp", () => buildGeluMlp()],
    ["transformer_2", () => buildTransformer(2)],
  ])("%s", (_, build) => {
    const original = build();
    const fused = fuse(build());
    checkContract(fused);
    const inputs = inputsFor(original, 3);
    for (const ins of [inputs, withSpecials(inputs)]) {
      expect(sameValue(evaluate(fused, ins), evaluate(original, ins))).toBe(true);
    }
  });
});

// Random graphs over [3,3] values: elementwise ops, transposes, reductions broadcast back
// (along the kept dim, or the wrong one), dots, with shared values and tuple roots.
type Step =
  | { k: "unary"; op: number; a: number }
  | { k: "binary"; op: number; a: number; b: number }
  | { k: "select"; a: number; b: number }
  | { k: "transpose"; a: number }
  | { k: "reduce"; op: number; dim: number; back: number; a: number; b: number }
  | { k: "dot"; a: number; b: number };

const UNARY = ["negate", "abs", "exponential", "tanh", "sqrt", "log", "floor", "sign"] as const;
const BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"] as const;
const REDUCERS = ["add", "max", "min"] as const;

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ k: fc.constant("unary" as const), op: fc.nat(7),
    a: fc.nat() }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant("binary" as const), op: fc.nat(6),
    a: fc.nat(), b: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("select" as const), a: fc.nat(),
    b: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("transpose" as const), a: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("reduce" as const), op: fc.nat(2),
    dim: fc.nat(1), back: fc.nat(1), a: fc.nat(), b: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("dot" as const), a: fc.nat(),
    b: fc.nat() }) },
);

function buildRandom(steps: readonly Step[], outputs: number): Module {
  const mb = new ModuleBuilder("random");
  mb.entry("main", (b) => {
    const s = arrayShape("f32", [3, 3]);
    const vals: Instruction[] = [b.parameter(s, "x"), b.parameter(s, "y")];
    vals.push(b.broadcast(b.parameter(arrayShape("f32", [3]), "v"), [3, 3], [1]));
    const at = (n: number) => vals[n % vals.length]!;
    for (const st of steps) {
      switch (st.k) {
        case "unary":
          vals.push(b.op(UNARY[st.op]!, [at(st.a)]));
          break;
        case "binary":
          vals.push(b.op(BINARY[st.op]!, [at(st.a), at(st.b)]));
          break;
        case "select":
          vals.push(b.select(b.compare(at(st.a), at(st.b), "LT"), at(st.a), at(st.b)));
          break;
        case "transpose":
          vals.push(b.transpose(at(st.a), [1, 0]));
          break;
        case "reduce": {
          const r = b.reduce(at(st.a), b.scalar("f32", 0), [st.dim],
            mb.reducer(REDUCERS[st.op]!, "f32"));
          // back 0: broadcast along the kept dim (an epilogue); 1: along the reduced one.
          const kept = st.dim === 0 ? 1 : 0;
          vals.push(b.add(b.broadcast(r, [3, 3], [st.back === 0 ? kept : 1 - kept]), at(st.b)));
          break;
        }
        case "dot":
          vals.push(b.dot(at(st.a), at(st.b), { lhsContracting: [1], rhsContracting: [0] }));
          break;
        default: {
          const never: never = st;
          throw new Error(`unknown step ${JSON.stringify(never)}`);
        }
      }
    }
    const outs = vals.slice(-Math.min(outputs, vals.length));
    return outs.length === 1 ? outs[0]! : b.tuple(outs);
  });
  return mb.build();
}

const f32Arb = fc.oneof(
  fc.float(),
  fc.constantFrom(NaN, Infinity, -Infinity, -0, 0, 1, -1, 0.5),
);

describe("differential on random graphs", () => {
  it("every pass order keeps results bit-identical and fusions within the contract", () => {
    const orders: (() => FusionPass[])[] = [
      () => fusionPasses(),
      () => [fuseElementwise(), fuseReductions(), fuseOutput()],
      () => [fuseOutput(), fuseElementwise()],
      () => [fuseReductions()],
    ];
    fc.assert(
      fc.property(
        fc.array(stepArb, { minLength: 1, maxLength: 14 }),
        fc.integer({ min: 1, max: 3 }),
        fc.nat(orders.length - 1),
        fc.array(f32Arb, { minLength: 21, maxLength: 21 }),
        (steps, outputs, order, xs) => {
          const original = buildRandom(steps, outputs);
          const fused = fuse(cloneModule(original), orders[order]!());
          checkContract(fused);
          const inputs = [
            literal("f32", [3, 3], xs.slice(0, 9)),
            literal("f32", [3, 3], xs.slice(9, 18)),
            literal("f32", [3], xs.slice(18)),
          ];
          expect(sameValue(evaluate(fused, inputs), evaluate(original, inputs))).toBe(true);
        },
      ),
      { numRuns: 250 },
    );
  });
});

// ---- decisions and their reasons -------------------------------------------------------------

describe("decisions", () => {
  /** e = exp(x) feeds two kernels that cannot be merged: a tuple of negate(e) and abs(e). */
  function sharedExp(): Module {
    return parseHlo(`HloModule shared
ENTRY %main (x: f32[4,8]) -> (f32[4,8], f32[4,8]) {
  %x = f32[4,8] parameter(0)
  %exp = f32[4,8] exponential(f32[4,8] %x)
  %keep_neg = f32[4,8] negate(f32[4,8] %exp)
  %keep_abs = f32[4,8] abs(f32[4,8] %exp)
  ROOT %t = (f32[4,8], f32[4,8]) tuple(f32[4,8] %keep_neg, f32[4,8] %keep_abs)
}
`);
  }

  it("does not duplicate an expensive op with two users, and says why", () => {
    const m = fuse(sharedExp());
    expect(m.entry.instructions.some((i) => i.opcode === "fusion")).toBe(false);
    const lines = explainFusion(sharedExp()).map(describeRecord);
    expect(lines).toContain(
      "not fusing %exp into %keep_abs: %exp has 2 users and is expensive",
    );
    expect(lines).toContain(
      "not fusing %exp into %keep_neg: %exp has 2 users and is expensive",
    );
  });

  it("duplicates a cheap op on parameters into both consumers and removes the original", () => {
    const m = fuse(parseHlo(`HloModule dup
ENTRY %main (x: f32[4], y: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  %dead_sum = f32[4] add(f32[4] %x, f32[4] %y)
  %keep_exp = f32[4] exponential(f32[4] %dead_sum)
  %keep_log = f32[4] log(f32[4] %dead_sum)
  ROOT %t = (f32[4], f32[4]) tuple(f32[4] %keep_exp, f32[4] %keep_log)
}
`));
    const entry = m.entry.instructions.map((i) => i.opcode);
    expect(entry.filter((o) => o === "fusion")).toHaveLength(2);
    expect(entry).not.toContain("add");
    for (const f of m.entry.instructions.filter((i) => i.opcode === "fusion")) {
      expect(f.called[0]!.instructions.map((i) => i.opcode)).toContain("add");
    }
  });

  it("does not recompute an expensive value behind a broadcast", () => {
    const text = `HloModule reuse
ENTRY %main (v: f32[4], y: f32[4,64]) -> f32[4,64] {
  %v = f32[4] parameter(0)
  %y = f32[4,64] parameter(1)
  %keep_exp = f32[4] exponential(f32[4] %v)
  %b = f32[4,64] broadcast(f32[4] %keep_exp), dimensions={0}
  ROOT %sum = f32[4,64] add(f32[4,64] %b, f32[4,64] %y)
}
`;
    const m = fuse(parseHlo(text));
    expect(m.entry.instructions.map((i) => i.name)).toContain("keep_exp");
    const why = explainFusion(parseHlo(text)).find((r) => r.producer === "keep_exp");
    expect(why && describeRecord(why)).toBe(
      "not fusing %keep_exp into %b: %keep_exp is expensive and would be recomputed 64 times " +
        "per element behind a broadcast",
    );
  });

  it("never duplicates into a reduction's input", () => {
    const text = `HloModule into_reduce
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (x: f32[4,8], y: f32[4,8]) -> (f32[4], f32[4,8]) {
  %x = f32[4,8] parameter(0)
  %y = f32[4,8] parameter(1)
  %shared = f32[4,8] multiply(f32[4,8] %x, f32[4,8] %y)
  %zero = f32[] constant(0)
  %r = f32[4] reduce(f32[4,8] %shared, f32[] %zero), dimensions={1}, to_apply=%add
  %other = f32[4,8] negate(f32[4,8] %shared)
  ROOT %t = (f32[4], f32[4,8]) tuple(f32[4] %r, f32[4,8] %other)
}
`;
    const rec = explainFusion(parseHlo(text)).find(
      (r) => r.producer === "shared" && r.consumer === "r",
    );
    expect(rec && describeRecord(rec)).toBe(
      "not fusing %shared into %r: %shared would be duplicated into the input of %r",
    );
  });

  const ADD = `%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}`;

  it("keeps a reduction fusion's root row- or reduce-shaped (a keepdim reshape stays out)", () => {
    const m = fuse(parseHlo(`HloModule keepdim
${ADD}
ENTRY %main (x: f32[4,4]) -> f32[4,1] {
  %x = f32[4,4] parameter(0)
  %zero = f32[] constant(0)
  %sum = f32[4] reduce(f32[4,4] %x, f32[] %zero), dimensions={1}, to_apply=%add
  %n = f32[] constant(4)
  %nb = f32[4] broadcast(f32[] %n), dimensions={}
  %mean = f32[4] divide(f32[4] %sum, f32[4] %nb)
  ROOT %keep_dims = f32[4,1] reshape(f32[4] %mean)
}
`));
    expect(m.entry.root.opcode).toBe("reshape");
    const f = m.entry.root.operand(0);
    expect(f.attrs.fusionKind).toBe("kInput");
    expect(f.called[0]!.root.name).toBe("mean");
  });

  it("explains why a reduce result broadcast along the wrong dim is not fused", () => {
    const text = `HloModule wrong
${ADD}
ENTRY %main (x: f32[4,4]) -> f32[4,4] {
  %x = f32[4,4] parameter(0)
  %zero = f32[] constant(0)
  %sum = f32[4] reduce(f32[4,4] %x, f32[] %zero), dimensions={1}, to_apply=%add
  %across = f32[4,4] broadcast(f32[4] %sum), dimensions={1}
  ROOT %wrong = f32[4,4] subtract(f32[4,4] %x, f32[4,4] %across)
}
`;
    const m = fuse(parseHlo(text));
    expect(fusionSummary(m).byKind).toMatchObject({ kLoop: 1, unfused: 1 });
    expect(explainFusion(parseHlo(text)).map(describeRecord)).toContain(
      "not fusing %sum into %across: %across broadcasts a reduce result to f32[4,4] with " +
        "dimensions={1}; only a broadcast back to the row f32[4,4] along the kept dims {0} fuses",
    );
  });

  it("does not fuse across a while boundary but fuses inside the body", () => {
    const m = fuse(CORPUS["embedding_loop"]!.build());
    const body = m.getComputation("body");
    const fusions = body.instructions.filter((i) => i.opcode === "fusion");
    expect(fusions).toHaveLength(1);
    expect(fusions[0]!.called[0]!.root.opcode).toBe("tanh");
    const entry = m.entry.instructions.map((i) => i.opcode);
    expect(entry).toContain("while");
    expect(entry).not.toContain("fusion");
  });

  it("does not fuse a call's result into its consumer, but fuses inside the callee", () => {
    const text = `HloModule calls
%f (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %e = f32[4] exponential(f32[4] %p)
  ROOT %n = f32[4] negate(f32[4] %e)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %a = f32[4] abs(f32[4] %x)
  %c = f32[4] call(f32[4] %a), to_apply=%f
  %s = f32[4] sqrt(f32[4] %c)
  ROOT %t = f32[4] tanh(f32[4] %s)
}
`;
    const m = fuse(parseHlo(text));
    const f = m.getComputation("f");
    expect(f.root.opcode).toBe("fusion");
    expect(m.entry.instructions.map((i) => i.opcode)).toEqual(["parameter", "abs", "call",
      "fusion"]);
    const rec = explainFusion(parseHlo(text)).find((r) => r.producer === "c");
    expect(rec && describeRecord(rec)).toBe(
      "not fusing %c into %s: %c is control flow; fusion never crosses a call, while or " +
        "conditional boundary",
    );
  });

  it("fuse-elementwise merges existing loop fusions with their producers and consumers", () => {
    const text = `HloModule merge
%f (p: f32[4], q: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %q = f32[4] parameter(1)
  ROOT %m = f32[4] multiply(f32[4] %p, f32[4] %q)
}
ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  %a = f32[4] add(f32[4] %x, f32[4] %y)
  %fu = f32[4] fusion(f32[4] %a, f32[4] %y), kind=kLoop, calls=%f
  ROOT %n = f32[4] negate(f32[4] %fu)
}
`;
    const original = parseHlo(text);
    const m = parseHlo(text);
    expect(fuseElementwise().run(m)).toBe(true);
    verifyModule(m);
    expect(m.entry.instructions.map((i) => i.opcode)).toEqual(["parameter", "parameter",
      "fusion"]);
    expect(m.entry.root.called[0]!.instructions.map((i) => i.opcode).sort()).toEqual(
      ["add", "multiply", "negate", "parameter", "parameter"],
    );
    expect(m.computations.map((c) => c.name)).not.toContain("f");
    const ins = [literal("f32", [4], [1, -0, NaN, 3]), literal("f32", [4], [-0, 0, 2, Infinity])];
    expect(sameValue(evaluate(m, ins), evaluate(original, ins))).toBe(true);
  });

  it("names fused computations after the root's frontend op and keeps its metadata", () => {
    const m = fuse(CORPUS["layer_norm"]!.build());
    const f = m.entry.root;
    expect(f.opcode).toBe("fusion");
    expect(f.called[0]!.name).toBe("fused_layer_norm");
    expect(f.metadata).toMatchObject({ opType: "layerNorm", opName: "encoder/ln",
      sourceLine: 30 });
    const plain = fuse(sharedExp());
    expect(plain.computations.map((c) => c.name)).not.toContain("fused_loop");
  });

  it("leaves the module explainFusion looks at unchanged", () => {
    const m = CORPUS["softmax"]!.build();
    const before = printHlo(m);
    const recs = explainFusion(m);
    expect(printHlo(m)).toBe(before);
    expect(recs.every((r) => r.pass === "fuse-reductions" || !r.decision.ok)).toBe(true);
    expect(recs.filter((r) => r.decision.ok).every((r) => r.kind === "kInput")).toBe(true);
  });

  it("each pass records its own decisions", () => {
    const p = fuseOutput();
    p.run(CORPUS["mlp"]!.build());
    expect(p.name).toBe("fuse-output");
    expect(p.decisions.filter((r) => r.decision.ok).map((r) => r.producer)).toContain("dot.1");
  });
});

describe("KILN_LOGS=fusion", () => {
  afterEach(() => {
    setLogTopics(undefined);
    vi.restoreAllMocks();
  });

  it("prints why two ops were or were not fused", () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    setLogTopics(["fusion"]);
    fuse(parseHlo(`HloModule log
ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %exp.3 = f32[4] exponential(f32[4] %x)
  %n = f32[4] negate(f32[4] %exp.3)
  %a = f32[4] abs(f32[4] %exp.3)
  %m = f32[4] multiply(f32[4] %a, f32[4] %a)
  ROOT %t = (f32[4], f32[4]) tuple(f32[4] %n, f32[4] %m)
}
`));
    expect(lines).toContain(
      "[kiln:fusion] fuse-elementwise: not fusing %exp.3 into %a: %exp.3 has 2 users and is " +
        "expensive\n",
    );
    expect(lines.some((l) => /fuse-elementwise: fused %a into %m \(kLoop %fusion\.\d+\)/.test(l)))
      .toBe(true);
  });
});
