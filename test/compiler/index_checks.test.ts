// Compiled and lazy programs check index values as eager mode does (issue 13, section 5):
// an out-of-range index given to embedding, gather, indexSelect, scatter, oneHot or a loss's
// class target raises
// eager's OpError (same class, same message) after the call, on every backend, for static and
// bounded-dynamic programs; in-range indices give eager's values; `checkIndices: false` keeps
// XLA's clamping; the check is plain IR, so the reference evaluator gives the same answer.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { INTERNALS, type Internals } from "../../compiler/compile.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal } from "../../ir/literal.ts";
import { backendNames, ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { lazy, ops, type Tensor, tensor } from "../../index.ts";
import { OpError } from "../../tensor/errors.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

// Every backend this machine has (native is off under KILN_NATIVE=0 or without a C compiler; CI
// has one, and test/runtime/native_toolchain.test.ts fails there if native cannot run).
const BACKENDS = (["interpreter", "js", "wasm", "native"] as const).filter((b) =>
  backendNames().includes(b),
);

/** The error `f()` throws (fails the test when it throws none). */
function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error");
}

/** The message without its ` at file:line:col` ending. */
const bare = (e: Error) => `${(e as OpError).op}: ${(e as OpError).detail}`;

/**
 * `actual` is eager's error: same class and message, the location included — a compiled
 * program's error names the op's recorded line, as eager's does. Lazy and replay segments keep
 * no per-op line, so there (`at: "read"`) the error names the line that read the value.
 */
function expectSameError(actual: Error, eager: Error, at: "op" | "read" = "op"): void {
  expect(eager).toBeInstanceOf(OpError);
  expect(actual).toBeInstanceOf(OpError);
  if (at === "op") expect(actual.message).toBe(eager.message);
  else {
    expect(bare(actual)).toBe(bare(eager));
    expect(actual.message).toMatch(/ at test\/compiler\/index_checks\.test\.ts:\d+:\d+$/);
  }
}

const weight = ops.arange(0, 20, 1, "float32").reshape(10, 2);
const embed = (ids: Tensor) => ops.embedding(ids, weight);
const gather0 = (x: Tensor, i: Tensor) => ops.gather(x, 0, i);
const x4 = tensor([10, 20, 30, 40]);

describe.each(BACKENDS)("compiled index checks on %s", (backend) => {
  it("embedding id 100 of 10 raises eager's error, on the first call and on a cache hit", () => {
    const ids = tensor([[1, 100]], "int64");
    const eager = thrown(() => embed(ids));
    expect(bare(eager)).toBe(
      "embedding: index 100 is out of bounds for the weight's 10 embeddings with size 10",
    );
    const fast = compile(embed, { backend });
    expectSameError(thrown(() => fast(ids)), eager);
    expectSameError(thrown(() => fast(ids)), eager);
    // The program stays cached: in-range ids run it without a new trace.
    expect(fast(tensor([[3, 9]], "int64")).toArray()).toEqual(embed(tensor([[3, 9]], "int64"))
      .toArray());
    expect(fast.stats.compiles).toBe(1);
  });

  it("gather with index 4 and -7 raises eager's error; in-range indices are unchanged", () => {
    const fast = compile(gather0, { backend });
    for (const bad of [[0, 4, 1], [2, -7], [-7, 4]]) {
      const i = tensor(bad, "int64");
      expectSameError(thrown(() => fast(x4, i)), thrown(() => gather0(x4, i)));
    }
    const good = tensor([3, 0, 2, 2], "int64");
    expect(fast(x4, good).toArray()).toEqual([40, 10, 30, 30]);
    const i32 = tensor([1, 5], "int32");
    expectSameError(thrown(() => fast(x4, i32)), thrown(() => gather0(x4, i32)));
  });

  it("checkIndices: false keeps XLA's clamping", () => {
    const fast = compile(gather0, { backend, checkIndices: false });
    expect(fast(x4, tensor([4, -7, 1], "int64")).toArray()).toEqual([40, 10, 20]);
    const fastEmbed = compile(embed, { backend, checkIndices: false });
    expect(fastEmbed(tensor([100], "int64")).toArray()).toEqual([[18, 19]]);
  });
});

describe("compiled index checks: the other checked ops", () => {
  it("indexSelect, scatter, scatterAdd and oneHot raise eager's errors", () => {
    const m = ops.arange(0, 6, 1, "float32").reshape(2, 3);
    const cases: [string, (i: Tensor) => Tensor, Tensor][] = [
      ["indexSelect", (i) => ops.indexSelect(m, 1, i), tensor([0, 3], "int64")],
      ["scatter", (i) => ops.scatter(x4, 0, i, tensor([1, 2])), tensor([1, -1], "int64")],
      ["scatterAdd", (i) => ops.scatterAdd(x4, 0, i, tensor([1, 2])), tensor([9, 0], "int64")],
      ["oneHot", (i) => ops.oneHot(i, 3), tensor([0, 3], "int64")],
      ["oneHot", (i) => ops.oneHot(i, 3), tensor([2, -1], "int64")],
      ["crossEntropy", (t) => ops.crossEntropy(m, t), tensor([0, 3], "int64")],
      ["nllLoss", (t) => ops.nllLoss(m, t), tensor([-1, 0], "int64")],
    ];
    for (const [name, f, bad] of cases) {
      const eager = thrown(() => f(bad));
      expect(eager.message.startsWith(`${name}: `)).toBe(true);
      const fast = compile(f, { backend: "js" });
      expectSameError(thrown(() => fast(bad)), eager);
    }
  });

  it("a loss's ignoreIndex is not out of range; in-range values are eager's", () => {
    const m = tensor([[0.5, -1, 2], [1, 0, -3]]);
    const f = (t: Tensor) => ops.crossEntropy(m, t);
    const t = tensor([-100, 2], "int64");
    expect(compile(f, { backend: "js" })(t).item()).toBe(f(t).item());
  });

  it("the first bad op in program order is the one reported, as in eager", () => {
    const f = (i: Tensor, j: Tensor) => embed(i).sum().add(gather0(x4, j).sum());
    const i = tensor([11], "int64");
    const j = tensor([5], "int64");
    expectSameError(thrown(() => compile(f, { backend: "js" })(i, j)), thrown(() => f(i, j)));
  });

  it("the check is plain IR: the reference evaluator reports the same position and value", () => {
    const fast = compile(gather0, { backend: "js" });
    fast(x4, tensor([0, 1, 2], "int64"));
    const internals = (fast as unknown as { [INTERNALS]: Internals })[INTERNALS];
    const module = internals.lastTrace()!.module!;
    const ops_ = module.computations.flatMap((c) => c.instructions.map((x) => x.opcode));
    expect(ops_).not.toContain("custom-call");
    const out = evaluate(module, [literal("f32", [4], [10, 20, 30, 40]),
      literal("s64", [3], [0n, 9n, -7n])]) as unknown as { data: ArrayLike<unknown> }[];
    // The user's result, then: an index was out of range, the first bad value, the bound.
    expect(out.length).toBe(4);
    expect(Array.from(out[1]!.data)).toEqual([1]);
    expect(Array.from(out[2]!.data)).toEqual([9n]);
    expect(Array.from(out[3]!.data)).toEqual([4n]);
  });

  it("replay mode (after a graph break) raises eager's error on indices computed in the graph",
    () => {
      const f = (x: Tensor, i: Tensor) => {
        const s = Number(x.sum().item()); // a graph break: the function runs in replay mode
        return gather0(x, i.add(Math.sign(s) - 1)).add(s);
      };
      const good = tensor([3, 0], "int64");
      const bad = tensor([1, 4], "int64");
      const fast = compile(f, { backend: "js" });
      expect(fast(x4, good).toArray()).toEqual(f(x4, good).toArray());
      expect(fast.stats.mode).toBe("replay");
      expectSameError(thrown(() => fast(x4, bad)), thrown(() => f(x4, bad)), "read");
      const loose = compile(f, { backend: "js", checkIndices: false });
      loose(x4, good);
      expect(loose.stats.mode).toBe("replay");
      expect(loose(x4, bad).toArray()).toEqual([120, 140]);
    });

  it("validates the option", () => {
    expect(() => compile(gather0, { checkIndices: "no" as unknown as boolean })).toThrow(
      'compile: checkIndices must be true or false, got "no"',
    );
  });

  it("bounded dynamic programs check the indices at every size", () => {
    const fast = compile(embed, { backend: "js", dynamic: { 0: { 1: { max: 16 } } } });
    for (const n of [3, 5, 7]) {
      const good = tensor([Array.from({ length: n }, (_, k) => k % 10)], "int64");
      expect(fast(good).toArray()).toEqual(embed(good).toArray());
      const bad = tensor([Array.from({ length: n }, (_, k) => (k === n - 1 ? 10 + n : k))],
        "int64");
      expectSameError(thrown(() => fast(bad)), thrown(() => embed(bad)));
    }
    expect(fast.stats.specializations).toEqual([]);
  });

  it("a bucketed program names the size of the call, not of the trace", () => {
    const fast = compile(gather0, { backend: "js", dynamic: { 0: { 0: { max: 16 } } } });
    const i = tensor([0, 6], "int64");
    // The declared dim makes the first call compile the bucket's [5, 8] program: it serves all.
    for (const n of [5, 8, 6, 7]) {
      const x = ops.arange(0, n, 1, "float32");
      if (n > 6) {
        expect(fast(x, i).toArray()).toEqual([0, 6]);
        continue;
      }
      const err = thrown(() => fast(x, i));
      expectSameError(err, thrown(() => gather0(x, i)));
      expect(bare(err)).toBe(`gather: index 6 is out of bounds for dim 0 with size ${n}`);
    }
    expect(fast.stats.compiles).toBe(1);
    expect(fast.stats.cacheHits).toBe(3);
  });
});

describe("lazy index checks", () => {
  it("raise eager's error when the graph is realized, and again on a second read", () => {
    const i = tensor([2, -7], "int64");
    const eager = thrown(() => gather0(x4, i));
    // Indices computed in the graph: their values are not known when the op is recorded.
    const t = lazy(() => gather0(x4, i.add(0)).mul(2));
    expectSameError(thrown(() => t.toArray()), eager, "read");
    expectSameError(thrown(() => t.toArray()), eager, "read");
    expect(lazy(() => embed(tensor([9], "int64").add(0)).toArray())).toEqual([[18, 19]]);
  });

  it("checkIndices: false keeps XLA's clamping", () => {
    const i = tensor([4, -7], "int64");
    const t = lazy(() => gather0(x4, i.add(0)), { checkIndices: false });
    expect(t.toArray()).toEqual([40, 10]);
  });
});
