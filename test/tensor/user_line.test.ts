// Every error raised for a user's op call ends with the user's line, `at file:line:col` — the
// offending call in THIS file — eager, under lazy(), and under compile() (where the tracer's
// recorded location names it), and `err.userFrame` holds the same place. The expected line and
// column are read from this file's text (the `run:` line after the case's name, the column of
// its `callee` token, where V8 puts a call's position), so editing the file never makes the
// expectations stale.

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { INTERNALS } from "../../compiler/compile.ts";
import createMLP from "../../models/mlp.ts";
import {
  arange,
  compile,
  EvalError,
  lazy,
  nn,
  OpError,
  ops,
  type Tensor,
  tensor,
  zeros,
} from "../../index.ts";
import { formatFrame, type UserFrame, userFrameOf } from "../../util/user_frame.ts";

const FILE = fileURLToPath(import.meta.url);
const LINES = readFileSync(FILE, "utf8").split("\n");

interface Case {
  /** Unique in this file: the case's call is on the first `run:` line from the one naming it. */
  readonly name: string;
  /** The call's token on that line (a method or function name). */
  readonly callee: string;
  readonly inputs: () => Tensor[];
  readonly run: (...xs: Tensor[]) => unknown;
  /** The message's start (kept as it was: `op: detail`). */
  readonly prefix: string;
  /** Not under compile(): a check compile() cannot see (a value read from a tensor). */
  readonly eagerOnly?: boolean;
}

const f = (...dims: number[]) => () => [zeros(dims)];
const two = (a: number[], b: number[]) => () => [zeros(a), zeros(b)];
const ints = () => [tensor([1, 2, 3], { dtype: "int32" })];

const CASES: Case[] = [
  { name: "matmul-inner", callee: "matmul", inputs: two([4, 8], [4, 8]),
    run: (a, b) => a!.matmul(b!), prefix: "matmul:" },
  { name: "matmul-batch", callee: "matmul", inputs: two([2, 3, 4], [5, 4, 2]),
    run: (a, b) => ops.matmul(a!, b!), prefix: "matmul:" },
  { name: "matmul-0d", callee: "matmul", inputs: two([], [3]),
    run: (a, b) => a!.matmul(b!), prefix: "matmul:" },
  { name: "bmm-rank", callee: "bmm", inputs: two([2, 3], [3, 2]),
    run: (a, b) => ops.bmm(a!, b!), prefix: "bmm:" },
  { name: "add-broadcast", callee: "add", inputs: two([2, 3], [4]),
    run: (a, b) => a!.add(b!), prefix: "add:" },
  { name: "mul-broadcast", callee: "mul", inputs: two([5, 2], [3, 2]),
    run: (a, b) => a!.mul(b!), prefix: "mul:" },
  { name: "sub-broadcast", callee: "sub", inputs: two([2, 2, 2], [3, 1]),
    run: (a, b) => ops.sub(a!, b!), prefix: "sub:" },
  { name: "where-broadcast", callee: "where", inputs: two([2], [3]),
    run: (a, b) => ops.where(a!.gt(0), a!, b!), prefix: "where:" },
  { name: "sum-dim", callee: "sum", inputs: f(2, 3), run: (a) => a!.sum(5), prefix: "sum:" },
  { name: "mean-dim-neg", callee: "mean", inputs: f(2, 3),
    run: (a) => a!.mean(-3), prefix: "mean:" },
  { name: "softmax-dim", callee: "softmax", inputs: f(2, 3),
    run: (a) => a!.softmax(2), prefix: "softmax:" },
  { name: "transpose-dim", callee: "transpose", inputs: f(2, 3),
    run: (a) => a!.transpose(0, 4), prefix: "transpose:" },
  { name: "permute-rank", callee: "permute", inputs: f(2, 3),
    run: (a) => a!.permute(0, 1, 2), prefix: "permute:" },
  { name: "squeeze-dim", callee: "squeeze", inputs: f(2, 3),
    run: (a) => a!.squeeze(3), prefix: "squeeze:" },
  { name: "unsqueeze-dim", callee: "unsqueeze", inputs: f(2, 3),
    run: (a) => a!.unsqueeze(7), prefix: "unsqueeze:" },
  { name: "reshape-size", callee: "reshape", inputs: f(2, 3),
    run: (a) => a!.reshape(4, 2), prefix: "reshape:" },
  { name: "reshape-two-infer", callee: "reshape", inputs: f(2, 3),
    run: (a) => a!.reshape(-1, -1), prefix: "reshape:" },
  { name: "view-size", callee: "view", inputs: f(2, 3), run: (a) => a!.view(7), prefix: "view:" },
  { name: "expand-size", callee: "expand", inputs: f(2, 3),
    run: (a) => a!.expand(4, 3), prefix: "expand:" },
  { name: "flatten-dims", callee: "flatten", inputs: f(2, 3),
    run: (a) => a!.flatten(1, 0), prefix: "flatten:" },
  { name: "cat-shapes", callee: "cat", inputs: two([2, 3], [2, 4]),
    run: (a, b) => ops.cat([a!, b!], 0), prefix: "cat:" },
  { name: "cat-dim", callee: "cat", inputs: two([2, 3], [2, 3]),
    run: (a, b) => ops.cat([a!, b!], 2), prefix: "cat:" },
  { name: "stack-shapes", callee: "stack", inputs: two([2], [3]),
    run: (a, b) => ops.stack([a!, b!]), prefix: "stack:" },
  { name: "narrow-range", callee: "narrow", inputs: f(4),
    run: (a) => a!.narrow(0, 2, 5), prefix: "narrow:" },
  { name: "split-dim", callee: "split", inputs: f(4),
    run: (a) => a!.split(2, 3), prefix: "split:" },
  { name: "pad-length", callee: "pad", inputs: f(4),
    run: (a) => ops.pad(a!, [1, 2, 3]), prefix: "pad:" },
  { name: "gather-rank", callee: "gather", inputs: f(2, 3),
    run: (a) => a!.gather(1, arange(3)), prefix: "gather:" },
  { name: "index-select-dim", callee: "indexSelect", inputs: f(2, 3),
    run: (a) => a!.indexSelect(2, arange(2)), prefix: "indexSelect:" },
  { name: "linear-features", callee: "linear", inputs: two([2, 3], [4, 5]),
    run: (a, w) => ops.linear(a!, w!), prefix: "linear:" },
  { name: "layer-norm-shape", callee: "layerNorm", inputs: f(2, 3),
    run: (a) => ops.layerNorm(a!, [4]), prefix: "layerNorm:" },
  { name: "cross-entropy-shape", callee: "crossEntropy", inputs: f(2, 3),
    run: (a) => ops.crossEntropy(a!, arange(3)), prefix: "crossEntropy:" },
  { name: "mse-shape", callee: "mseLoss", inputs: two([2, 3], [3, 2]),
    run: (a, b) => ops.mseLoss(a!, b!), prefix: "mseLoss:" },
  { name: "sum-bad-dim-type", callee: "sum", inputs: f(2),
    run: (a) => a!.sum("x" as never), prefix: "sum:" },
  { name: "to-bad-dtype", callee: "to", inputs: f(2),
    run: (a) => a!.to("float99" as never), prefix: "to:" },
  { name: "user-own-type-error", callee: "bitwiseNot", inputs: f(2),
    run: (a) => (a as unknown as { bitwiseNot?: () => Tensor }).bitwiseNot!(),
    prefix: "", eagerOnly: true },
  { name: "tril-rank", callee: "tril", inputs: f(3), run: (a) => a!.tril(), prefix: "tril:" },
  { name: "topk-k", callee: "topk", inputs: f(3), run: (a) => a!.topk(5), prefix: "topk:" },
  { name: "einsum-spec", callee: "einsum", inputs: two([2, 3], [4, 5]),
    run: (a, b) => ops.einsum("ij,jk->ik", a!, b!), prefix: "einsum:" },
  { name: "embedding-ids-dtype", callee: "embedding", inputs: two([3], [4, 2]),
    run: (ids, w) => ops.embedding(ids!, w!), prefix: "embedding:" },
  { name: "item-many", callee: "item", inputs: f(3),
    run: (a) => a!.item(), prefix: "item:", eagerOnly: true },
  { name: "int-matmul-float", callee: "matmul", inputs: () => [ints()[0]!, zeros(4)],
    run: (a, b) => a!.matmul(b!), prefix: "matmul:" },
  { name: "nn-linear-features", callee: "forward", inputs: f(2, 7),
    run: (x) => new nn.Linear(3, 4).forward(x!), prefix: "linear:" },
];

/** The case's offending call: the callee's position on the `run:` line of the case. */
function expectedFrame(c: Case): UserFrame {
  const tag = `name: "${c.name}"`;
  const start = LINES.findIndex((l) => l.includes(tag));
  if (start < 0) throw new Error(`case ${c.name} not found in ${FILE}`);
  const index = LINES.findIndex((l, i) => i >= start && l.includes("run:"));
  const text = LINES[index]!;
  const col = text.indexOf(`${c.callee}(`, text.indexOf("run:"));
  if (col < 0) throw new Error(`case ${c.name}: callee '${c.callee}' not on its run: line`);
  return { file: FILE, line: index + 1, column: col + 1 };
}

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(Error);
    return e as Error;
  }
  throw new Error("expected an error");
}

function checkLocated(e: Error, c: Case): void {
  const want = expectedFrame(c);
  expect(e.message.startsWith(c.prefix), e.message).toBe(true);
  expect(e.message.endsWith(` at ${formatFrame(want)}`), e.message).toBe(true);
  const frame = (e as { userFrame?: UserFrame }).userFrame;
  expect(frame, e.message).toBeDefined();
  expect({ file: frame!.file, line: frame!.line, column: frame!.column }).toEqual(want);
}

// The user-own-type-error row: a TypeError from the user's own code passes unchanged.
const OP_CASES = CASES.filter((c) => c.prefix !== "");

describe("eager: the message ends with the user's line", () => {
  it.each(OP_CASES.map((c) => [c.name, c] as const))("%s", (_, c) => {
    const e = thrown(() => c.run(...c.inputs()));
    expect(e).toBeInstanceOf(OpError);
    checkLocated(e, c);
    // The stack has the user's frame too, though ops raise errors 13-18 frames deep.
    expect(e.stack).toContain(`${FILE}:${expectedFrame(c).line}:`);
  });

  it("is found with Node's default 10-frame stack limit", () => {
    const saved = Error.stackTraceLimit;
    Error.stackTraceLimit = 10;
    try {
      for (const c of OP_CASES) {
        const e = thrown(() => c.run(...c.inputs()));
        checkLocated(e, c);
        expect(e.stack).toContain(`${FILE}:${expectedFrame(c).line}:`);
      }
      expect(Error.stackTraceLimit).toBe(10);
    } finally {
      Error.stackTraceLimit = saved;
    }
  });

  it("keeps `detail` and the prefix as they were, and a user's own error unchanged", () => {
    const c = CASES.find((x) => x.name === "matmul-inner")!;
    const e = thrown(() => c.run(...c.inputs())) as OpError;
    expect(e.op).toBe("matmul");
    expect(e.detail).not.toContain(" at ");
    expect(e.message).toBe(`matmul: ${e.detail} at ${formatFrame(expectedFrame(c))}`);
    const own = CASES.find((x) => x.name === "user-own-type-error")!;
    const t = thrown(() => own.run(...own.inputs()));
    expect(t).toBeInstanceOf(TypeError);
    expect((t as { userFrame?: unknown }).userFrame).toBeUndefined();
  });
});

describe("lazy(): the message ends with the user's line", () => {
  it.each(OP_CASES.map((c) => [c.name, c] as const))("%s", (_, c) => {
    const xs = c.inputs();
    const e = thrown(() => lazy(() => c.run(...xs)));
    checkLocated(e, c);
  });
});

describe("compile(): the message ends with the traced op's line", () => {
  const compiled = OP_CASES.filter((c) => !c.eagerOnly);
  it.each(compiled.map((c) => [c.name, c] as const))("%s", (_, c) => {
    const fn = compile(c.run);
    const e = thrown(() => fn(...c.inputs()));
    checkLocated(e, c);
  });
});

/** The position of `token` on the first line of `file` (under Kiln's root) containing `text`. */
function positionIn(file: string, text: string, token: string): UserFrame {
  const path = fileURLToPath(new URL(`../../${file}`, import.meta.url));
  const lines = readFileSync(path, "utf8").split("\n");
  const index = lines.findIndex((l) => l.includes(text));
  expect(index, `${text} in ${file}`).toBeGreaterThanOrEqual(0);
  return { file: path, line: index + 1, column: lines[index]!.indexOf(token) + 1 };
}

describe("a zoo model's op: the zoo's line inside the user's call", () => {
  const zoo = positionIn("models/mlp.ts", "return this.layers.call(x);", "call");
  const mlp = createMLP();
  const cases: Case[] = [
    { name: "zoo-eager", callee: "forward", inputs: f(2, 999),
      run: (x) => mlp.forward(x!), prefix: "linear:" },
  ];
  it("eager and compiled", () => {
    const c = cases[0]!;
    const eager = thrown(() => c.run(...c.inputs()));
    for (const e of [eager, thrown(() => compile(c.run)(...c.inputs()))]) {
      checkLocated(e, c);
      expect(e.message).toContain(` (in ${formatFrame(zoo)}) at `);
      expect((e as { userFrame?: UserFrame }).userFrame!.zoo).toEqual(zoo);
    }
  });
});

describe("running a compiled program", () => {
  it("an error naming an instruction is at that op's traced line, not the call's", () => {
    const c = CASES.find((x) => x.name === "matmul-inner")!;
    // The same call on good shapes: traced, compiled and run once without error.
    const fn = compile(c.run);
    fn(zeros([4, 8]), zeros([8, 2]));
    const entry = fn[INTERNALS].entries()[0]!;
    const dot = [...entry.module!.allInstructions()].find((i) => i.metadata.opType === "matmul")!;
    expect(dot.metadata.sourceLine).toBe(expectedFrame(c).line);
    const exe = entry.exe as { run: (...a: unknown[]) => unknown };
    exe.run = () => {
      throw new EvalError(dot.name, "injected failure");
    };
    const e = thrown(() => fn(zeros([4, 8]), zeros([8, 2])));
    expect(e).toBeInstanceOf(EvalError);
    expect(e.message.startsWith(`evaluate %${dot.name}: injected failure`)).toBe(true);
    checkLocated(e, { ...c, prefix: "evaluate" });
  });
});

describe("compile(fullgraph): a graph break", () => {
  it("ends with the break's line, once", () => {
    const c: Case = { name: "graph-break-item", callee: "item", inputs: f(1),
      run: (a) => a!.add(a!.item()), prefix: "compile(fullgraph): " };
    const e = thrown(() => compile(c.run, { fullgraph: true })(...c.inputs()));
    checkLocated(e, c);
    expect(e.message.split(" at ").length, e.message).toBe(2);
  });
});

describe("userFrameOf", () => {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const at = (file: string, line: number) => `    at f (${root}${file}:${line}:5)`;

  it("skips Kiln's library and keeps a zoo model's line inside the user's", () => {
    const stack = [
      "OpError: matmul: bad",
      at("tensor/dispatch.ts", 10),
      at("index.ts", 3),
      at("models/gpt2.ts", 88),
      at("models/gpt2.ts", 99),
      at("cli/load.ts", 4),
      at("examples/train.ts", 12),
    ].join("\n");
    expect(userFrameOf(stack)).toEqual({
      file: `${root}examples/train.ts`,
      line: 12,
      column: 5,
      zoo: { file: `${root}models/gpt2.ts`, line: 88, column: 5 },
    });
  });

  it("is the zoo's line when no user code is on the stack (the CLI running a zoo model)", () => {
    const stack = [at("tensor/dispatch.ts", 10), at("models/mlp.ts", 7), at("cli/main.ts", 1)];
    expect(userFrameOf(stack.join("\n"))).toEqual({
      file: `${root}models/mlp.ts`,
      line: 7,
      column: 5,
    });
    expect(userFrameOf(at("tensor/x.ts", 1))).toBeUndefined();
  });
});
