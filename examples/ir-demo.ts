// The README's main job for now: build a small MLP with softmax in the IR using the builder,
// verify it, print it as HLO text, evaluate it with the reference evaluator, and show that it
// survives the text and protobuf round trips with the same fingerprint.

import {
  arrayShape,
  evaluate,
  fingerprint,
  literal,
  type Literal,
  moduleFromProto,
  moduleToProto,
  ModuleBuilder,
  parseHlo,
  printHlo,
  verifyModule,
} from "../index.ts";

const batch = 2;
const inF = 4;
const hidden = 8;
const outF = 3;

const mb = new ModuleBuilder("mlp_softmax");
const addF32 = mb.reducer("add", "f32");
const maxF32 = mb.reducer("max", "f32");
mb.entry("main", (b) => {
  // The caller's file:line:col from the stack, the way the tracer will record user source lines.
  const src = (opType: string) => {
    const frame = new Error().stack?.split("\n")[2] ?? "";
    const m = /([^/\\(\s]+\.ts):(\d+):(\d+)/.exec(frame);
    return m
      ? { opType, sourceFile: `examples/${m[1]}`, sourceLine: Number(m[2]),
        sourceColumn: Number(m[3]) }
      : { opType };
  };
  const x = b.parameter(arrayShape("f32", [batch, inF]), "x");
  const w1 = b.parameter(arrayShape("f32", [inF, hidden]), "w1");
  const b1 = b.parameter(arrayShape("f32", [hidden]), "b1");
  const w2 = b.parameter(arrayShape("f32", [hidden, outF]), "w2");
  const h = b.withMetadata(src("linear"), () => {
    const mm = b.dot(x, w1, { lhsContracting: [1], rhsContracting: [0] });
    return b.add(mm, b.broadcast(b1, [batch, hidden], [1]));
  });
  const r = b.withMetadata(src("relu"), () =>
    b.maximum(h, b.broadcast(b.scalar("f32", 0), [batch, hidden], [])),
  );
  const logits = b.withMetadata(src("linear"), () =>
    b.dot(r, w2, { lhsContracting: [1], rhsContracting: [0] }),
  );
  return b.withMetadata(src("softmax"), () => {
    const m = b.reduce(logits, b.scalar("f32", -Infinity), [1], maxF32);
    const e = b.exp(b.subtract(logits, b.broadcast(m, [batch, outF], [0])));
    const s = b.reduce(e, b.scalar("f32", 0), [1], addF32);
    return b.divide(e, b.broadcast(s, [batch, outF], [0]));
  });
});
const module = mb.build();

console.log("== The module, as XLA-style HLO text ==\n");
const text = printHlo(module);
console.log(text);

const ramp = (dims: number[], scale: number): Literal => {
  const n = dims.reduce((a, c) => a * c, 1);
  return literal("f32", dims, Array.from({ length: n }, (_, i) => Math.sin(i + 1) * scale));
};
const args = [ramp([batch, inF], 1), ramp([inF, hidden], 0.5), ramp([hidden], 0.1),
  ramp([hidden, outF], 0.5)];
const out = evaluate(module, args) as Literal;
console.log("== Evaluated with the reference evaluator ==\n");
console.log(out.toString());
const rows = out.toArray() as number[][];
console.log(`row sums (softmax, so 1): ${rows.map((r) => r.reduce((a, c) => a + c, 0).toFixed(6))}`);

const fromText = parseHlo(text);
verifyModule(fromText);
const bytes = moduleToProto(module);
const fromProto = moduleFromProto(bytes);
console.log("\n== Round trips ==\n");
console.log(`text  -> module -> text identical: ${printHlo(fromText) === text}`);
console.log(`proto (${bytes.length} bytes) -> module -> text identical: ${
  printHlo(fromProto) === text}`);
console.log(`fingerprint: ${fingerprint(module)}`);
console.log(`same fingerprint after both round trips: ${
  fingerprint(fromText) === fingerprint(module) && fingerprint(fromProto) === fingerprint(module)}`);
