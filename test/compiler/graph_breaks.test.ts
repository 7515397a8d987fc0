// Graph breaks and replay mode: item()-based control flow, a tensor coerced to a number,
// early returns that depend on data, console.log and other side effects found statically,
// mutation of outside objects, random numbers (dropout in training mode) — each gives eager's
// results, the right number of graphs and breaks, and the user's source line (found by a
// marker comment in this file, so the test does not hard-code line numbers). Loops over
// x.shape[0] are NOT breaks (shapes are static and guarded). Replay mode compiles each segment
// once and reuses it; fullgraph turns breaks and unreplayable effects into errors naming the
// line.

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { compile, explain, GraphBreakError } from "../../compiler/index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { manualSeed, nn, randn, type Tensor, tensor } from "../../index.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

const FILE = fileURLToPath(import.meta.url);
const SOURCE = readFileSync(FILE, "utf8").split("\n");

/** `test/compiler/graph_breaks.test.ts:LINE` of the line holding `// MARK: name`. */
function lineOf(name: string): number {
  const i = SOURCE.findIndex((l) => l.includes(`// MARK: ${name}`) && !l.includes("lineOf"));
  if (i < 0) throw new Error(`no marker ${name}`);
  return i + 1;
}

function same(a: unknown, b: unknown): void {
  const x = a as Tensor;
  const y = b as Tensor;
  expect(x.shape).toEqual(y.shape);
  expect(Array.from(x.data() as Float32Array)).toEqual(Array.from(y.data() as Float32Array));
}

function gate(x: Tensor): Tensor {
  const s = x.sum();
  if ((s.item() as number) > 0) { // MARK: gate
    return x.mul(2).add(1);
  }
  return x.neg();
}

function early(x: Tensor): Tensor {
  const y = x.abs().add(1);
  if ((y.max().item() as number) > 3) return y; // MARK: early
  const z = y.mul(y);
  return z.sub(1);
}

function coerce(x: Tensor): Tensor {
  const m = x.mean();
  return +m > 0 ? x.relu() : x.sigmoid(); // MARK: coerce
}

function noisy(x: Tensor): Tensor {
  const y = x.add(1);
  console.log("noisy", y.shape); // MARK: log
  return y.mul(2);
}

function rows(x: Tensor): Tensor {
  let acc = x.narrow(0, 0, 1);
  for (let i = 1; i < x.shape[0]!; i++) acc = acc.add(x.narrow(0, i, 1));
  return acc;
}

function softplus(x: Tensor): Tensor {
  return x.exp().add(1).log(); // MARK: meta
}

const seen: number[] = [];
function collects(x: Tensor): Tensor {
  seen.push(x.shape[0]!); // MARK: push
  return x.add(1);
}

describe("graph breaks", () => {
  it("item() control flow: two graphs, one break at the user's line, eager results", () => {
    const fast = compile(gate);
    const pos = tensor([1, 2, 3]);
    const neg = tensor([-1, -2, -3]);
    same(fast(pos), gate(pos));
    same(fast(neg), gate(neg));
    same(fast(pos), gate(pos));
    const s = fast.stats;
    expect(s.mode).toBe("replay");
    expect(s.graphBreaks.length).toBe(1);
    expect(s.graphBreaks[0]!.how).toBe("item");
    expect(s.graphBreaks[0]!.where).toContain(`graph_breaks.test.ts:${lineOf("gate")}:`);
    expect(s.graphBreaks[0]!.count).toBe(3);
    expect(s.replayReasons[0]!.where).toContain(`:${lineOf("gate")}:`);
    const e = explain(gate, pos);
    expect(e.mode).toBe("replay");
    expect(e.graphs).toBe(2);
    expect(e.opsPerGraph).toEqual([1, 2]);
    expect(e.graphBreaks.map((b) => b.where)).toEqual([
      expect.stringContaining(`graph_breaks.test.ts:${lineOf("gate")}:`),
    ]);
    expect(String(e)).toContain(`graph breaks: 1`);
  });

  it("replay mode compiles each segment once and reuses it", () => {
    const fast = compile(gate);
    const x = tensor([1, 2, 3]);
    fast(x);
    const compiled = fast.stats.segmentsCompiled;
    for (let i = 0; i < 3; i++) same(fast(tensor([4, 5, 6 + i])), gate(tensor([4, 5, 6 + i])));
    expect(fast.stats.segmentsCompiled).toBe(compiled);
    expect(fast.stats.segments).toBe(8);
  });

  it("an early return that depends on data", () => {
    const fast = compile(early);
    for (const v of [[1, 5], [0.5, 1], [-4, 0]]) {
      const x = tensor(v);
      same(fast(x), early(x));
    }
    expect(fast.stats.graphBreaks.map((b) => b.where)).toEqual([
      expect.stringContaining(`:${lineOf("early")}:`),
    ]);
  });

  it("a tensor coerced to a number is a break", () => {
    const fast = compile(coerce);
    for (const v of [[1, 2], [-3, 1]]) same(fast(tensor(v)), coerce(tensor(v)));
    expect(fast.stats.graphBreaks[0]).toMatchObject({ how: "valueOf" });
    expect(fast.stats.graphBreaks[0]!.where).toContain(`:${lineOf("coerce")}:`);
  });

  it("console.log runs every call (replay mode, reported with its line)", () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    try {
      const fast = compile(noisy);
      const x = randn(2, 2);
      same(fast(x), noisy(x));
      same(fast(x), noisy(x));
      expect(log).toHaveBeenCalledTimes(4);
      expect(fast.stats.mode).toBe("replay");
      expect(fast.stats.graphBreaks).toEqual([]);
      const r = fast.stats.replayReasons[0]!;
      expect(r.reason).toMatch(/console\.log/);
      expect(r.where).toContain(`graph_breaks.test.ts:${lineOf("log")}:`);
    } finally {
      log.mockRestore();
    }
  });

  it("mutating an outside object runs every call", () => {
    seen.length = 0;
    const fast = compile(collects);
    fast(randn(3));
    fast(randn(3));
    expect(seen).toEqual([3, 3]);
    expect(fast.stats.replayReasons[0]!.where).toContain(`:${lineOf("push")}:`);
  });

  it("a loop over x.shape[0] is one graph with no break, recompiling per size", () => {
    const fast = compile(rows);
    for (const n of [3, 3, 5]) {
      const x = randn(n, 4);
      same(fast(x), rows(x));
    }
    expect(fast.stats).toMatchObject({ mode: "graph", compiles: 2, cacheHits: 1 });
    expect(fast.stats.graphBreaks).toEqual([]);
    expect(fast.stats.recompiles[0]!.reason).toBe(
      "x.shape[0] was 3, now 5: dim 0 of x is now dynamic (<=8, bucket pow2)",
    );
    const e = explain(rows, randn(3, 4));
    expect(e).toMatchObject({ mode: "graph", graphs: 1, opsPerGraph: [5] });
    expect(e.guards).toContainEqual({ kind: "shape", path: "x", expected: [3, 4] });
  });

  it("dropout in training mode: one program, a fresh mask each call, eager's masks", () => {
    class D extends nn.Module {
      drop = new nn.Dropout(0.5);
      forward(x: Tensor): Tensor {
        return this.drop.call(x).add(1);
      }
    }
    const m = new D();
    const x = randn(64);
    manualSeed(11);
    const want = [m.call(x), m.call(x), m.call(x)];
    manualSeed(11);
    const fast = compile(m);
    const got = [fast(x), fast(x), fast(x)];
    // Each call draws its mask from the default generator before the program runs, as eager
    // code draws it: the same stream, so the same masks.
    got.forEach((g, i) => same(g, want[i]));
    expect(Array.from(got[1]!.data() as Float32Array)).not.toEqual(Array.from(got[2]!.data() as Float32Array));
    expect(fast.stats).toMatchObject({ mode: "graph", compiles: 1, cacheHits: 2 });
    m.eval();
    const fastEval = compile(m);
    same(fastEval(x), m.call(x));
    expect(fastEval.stats.mode).toBe("graph");
  });
});

describe("capture metadata", () => {
  it("every instruction names its frontend op and the user's source line", () => {
    const e = explain(softplus, randn(3));
    expect(e.mode).toBe("graph");
    const line = lineOf("meta");
    const file = `source_file=".*graph_breaks\\.test\\.ts"`;
    expect(e.program).toMatch(
      new RegExp(`exponential\\(.*metadata=\\{op_type="exp" ${file} source_line=${line}`),
    );
    expect(e.program).toMatch(new RegExp(`log\\(.*op_type="log" .*source_line=${line}`));
  });
});

describe("fullgraph", () => {
  it("a break is an error naming the line", () => {
    const fast = compile(gate, { fullgraph: true });
    let err: unknown;
    try {
      fast(tensor([1, 2]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GraphBreakError);
    expect((err as Error).message).toContain(`graph_breaks.test.ts:${lineOf("gate")}:`);
    expect((err as Error).message).toMatch(/item\(\)/);
    expect(fast.stats.entries).toBe(0);
  });

  it("an unreplayable side effect is an error naming the line", () => {
    const fast = compile(noisy, { fullgraph: true });
    expect(() => fast(randn(2))).toThrow(GraphBreakError);
    expect(() => fast(randn(2))).toThrow(new RegExp(`graph_breaks.test.ts:${lineOf("log")}:`));
  });

  it("code without breaks compiles under fullgraph", () => {
    const fast = compile(rows, { fullgraph: true });
    const x = randn(2, 3);
    same(fast(x), rows(x));
    expect(fast.stats.mode).toBe("graph");
  });
});
