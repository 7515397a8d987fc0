// The pieces under compile(): guards as data compiled into one function (every kind, reasons
// in words, a throwing read counted as a failure), pytrees (round trips, paths, cycles),
// parameter names from source, free variables read through node:inspector, KILN_LOGS output
// for recompiles, guards and graph breaks, and `freeze` (weights folded in as constants,
// guarded by value identity).

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { compile } from "../../compiler/index.ts";
import { readFreeVariables } from "../../compiler/freevars.ts";
import { failureReason, GuardSet, type GuardSpec } from "../../compiler/guards.ts";
import { flatten, formatPath, unflatten } from "../../compiler/pytree.ts";
import { parameterNames } from "../../compiler/source.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { nn, randn, type Tensor, tensor } from "../../index.ts";
import { setLogTopics } from "../../util/log.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

describe("guards", () => {
  const obj = { training: false, n: 3, s: "a" };
  const plain = (path: string, expected: unknown, access: GuardSpec["access"]): GuardSpec => ({
    guard: { kind: "value", path, expected },
    access,
    test: "plain",
  });
  const x0 = { root: "arg", keys: [0] } as const;
  const specs: GuardSpec[] = [
    plain("arguments.length", 2, { root: "argCount" }),
    { guard: { kind: "dtype", path: "x", expected: "float32" }, access: x0, test: "tensor" },
    { guard: { kind: "shape", path: "x", expected: [2, 3] }, access: x0, test: "tensor" },
    plain("this.training", false, { root: "ref", ref: obj, key: "training" }),
    {
      guard: { kind: "range", path: "n", expected: [1, 8] },
      access: { root: "ref", ref: obj, key: "n" },
      test: "plain",
    },
    {
      guard: { kind: "identity", path: "opts", expected: obj },
      access: { root: "arg", keys: [1] },
      test: "plain",
    },
    plain("kiln.lazy", false, { root: "setting", index: 0 }),
  ];
  const set = new GuardSet(specs);
  const ok = () => ({ args: [randn(2, 3), obj] as unknown[], free: [], settings: [false] });

  it("hold on matching inputs", () => {
    expect(set.first(ok())).toBe(-1);
    expect(set.failure(ok())).toBeUndefined();
  });

  it("name the first failing guard, in words", () => {
    const reason = (inputs: ReturnType<typeof ok>) => set.failure(inputs)?.reason;
    expect(reason({ ...ok(), args: [randn(2, 3)] })).toBe("arguments.length was 2, now 1");
    expect(reason({ ...ok(), args: [randn(2, 4), obj] })).toBe("x.shape[1] was 3, now 4");
    expect(reason({ ...ok(), args: [randn(2, 3, 1), obj] })).toMatch(/^x\.ndim was 2, now 3/);
    expect(reason({ ...ok(), args: [randn(2, 3).to("int32"), obj] })).toBe(
      "x.dtype was float32, now int32",
    );
    expect(reason({ ...ok(), args: [5, obj] })).toBe("x was a tensor, now 5");
    expect(reason({ ...ok(), args: [randn(2, 3), { ...obj }] })).toBe(
      "opts is a different object (was an object, now an object)",
    );
    expect(reason({ ...ok(), settings: [true] })).toBe("kiln.lazy was false, now true");
    obj.training = true;
    expect(reason(ok())).toBe("this.training was false, now true");
    obj.training = false;
    obj.n = 9;
    expect(reason(ok())).toBe("n was in [1, 8], now 9");
    obj.n = 3;
  });

  it("a read that throws fails its guard with the error as the reason", () => {
    const bad = {
      get k(): number {
        throw new Error("no k");
      },
    };
    const s = new GuardSet([
      {
        guard: { kind: "value", path: "o.k", expected: 1 },
        access: { root: "ref", ref: bad, key: "k" },
        test: "plain",
      },
    ]);
    const inputs = { args: [], free: [], settings: [] };
    expect(s.first(inputs)).toBe(0);
    expect(failureReason(s.specs[0]!, inputs)).toBe("o.k could not be read: no k");
  });

  it("compile into one function (no per-guard closures)", () => {
    expect(typeof set.fn).toBe("function");
    const src = set.fn.toString();
    expect(src).toContain("v = K[0].training;");
    expect(src).toContain("v >= 1 && v <= 8");
    expect(src.match(/function/g)!.length).toBe(1);
  });
});

describe("pytrees", () => {
  it("flatten and unflatten round-trip nested arrays and plain objects", () => {
    const t = tensor([1]);
    const value = { a: [t, 2, { b: "x", c: null }], d: undefined, e: true };
    const { spec, leaves } = flatten(value);
    expect(leaves.map((l) => l.kind)).toEqual([
      "tensor", "number", "string", "null", "undefined", "boolean",
    ]);
    expect(leaves[2]!.path).toEqual(["a", 2, "b"]);
    expect(unflatten(spec, leaves.map((l) => l.value))).toEqual(value);
    expect(() => unflatten(spec, [])).toThrow(/too few leaves/);
  });

  it("keeps class instances as opaque leaves and rejects cycles", () => {
    const m = new Map();
    expect(flatten([m]).leaves[0]).toMatchObject({ kind: "opaque", value: m });
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    expect(() => flatten(cyclic)).toThrow(/contains itself/);
  });

  it("formats paths as code", () => {
    expect(formatPath("opts", ["mask", 0, "a-b"])).toBe(`opts.mask[0]["a-b"]`);
  });
});

describe("source", () => {
  it("reads parameter names, skipping types, defaults and destructuring", () => {
    function f(x: Tensor, scale = 2, { a }: { a: number } = { a: 1 }, ...rest: number[]) {
      return [x, scale, a, rest];
    }
    expect(parameterNames(f as never)).toEqual(["x", "scale", undefined, undefined]);
    expect(parameterNames(((y: number) => y) as never)).toEqual(["y"]);
  });
});

describe("Tensor coercion (the hook behind coercion breaks)", () => {
  it("gives a one-element tensor's value, the repr for strings, an error otherwise", () => {
    expect(+tensor(2.5)).toBe(2.5);
    expect(Number(tensor([3]).mul(2)) > 5).toBe(true);
    expect(`${tensor([1, 2])}`).toBe(tensor([1, 2]).toString());
    expect("t=" + tensor([1, 2])).toBe(`t=${tensor([1, 2]).toString()}`);
    expect(() => +tensor([1, 2])).toThrow(/a tensor with 2 elements cannot be converted/);
  });
});

describe("free variables", () => {
  it("reads closure and module-level bindings through the inspector", () => {
    let level = 1;
    const config = { eps: 0.5 };
    const fn = (x: number) => x * level + config.eps;
    expect(readFreeVariables(fn as never, ["level", "config", "missing"])).toEqual({
      values: [1, config, undefined],
      missing: ["missing"],
    });
    level = 7;
    expect(readFreeVariables(fn as never, ["level"]).values).toEqual([7]);
  });
});

describe("KILN_LOGS", () => {
  afterEach(() => setLogTopics(undefined));

  it("prints recompiles, guards and graph breaks as they happen", () => {
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      setLogTopics(["recompiles", "guards", "graph_breaks"]);
      const scaleBy = (x: Tensor) => x.mul(2);
      const broken = (x: Tensor) => x.mul((x.sum().item() as number) > 0 ? 1 : -1);
      const fast = compile(scaleBy);
      fast(randn(2));
      fast(randn(3));
      compile(broken)(randn(2));
    } finally {
      spy.mockRestore();
    }
    const text = lines.join("");
    expect(text).toMatch(/\[kiln:guards\] scaleBy: entry 1 guards \(\d+\):/);
    expect(text).toContain("[kiln:guards]   x.shape == [2]");
    expect(text).toContain("[kiln:guards] scaleBy: guard failed: x.shape[0] was 2, now 3");
    expect(text).toContain(
      "[kiln:recompiles] scaleBy: recompiling (call 2): x.shape[0] was 2, now 3",
    );
    expect(text).toMatch(
      /\[kiln:graph_breaks\] broken: graph break at test\/compiler\/guards\.test\.ts:\d+:\d+: item/,
    );
    expect(text).toMatch(/\[kiln:recompiles\] broken: runs in replay mode/);
  });
});

describe("freeze", () => {
  it("folds weights in as constants; new weights recompile, naming the parameter", () => {
    class Lin extends nn.Module {
      fc = new nn.Linear(3, 2);
      forward(x: Tensor): Tensor {
        return this.fc.call(x);
      }
    }
    const m = new Lin();
    const fast = compile(m, { freeze: true });
    const x = randn(4, 3);
    const same = (a: Tensor, b: Tensor) =>
      expect(Array.from(a.data() as Float32Array)).toEqual(Array.from(b.data() as Float32Array));
    same(fast(x), m.call(x));
    same(fast(x), m.call(x));
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 1 });
    m.loadStateDict(new Lin().stateDict());
    same(fast(x), m.call(x));
    expect(fast.stats.recompiles[0]!.reason).toMatch(
      /^this\.fc\.(weight|bias)\.impl is a different object/,
    );
  });
});
