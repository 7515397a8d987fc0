// Options are never silently ignored: an unknown key anywhere in compile()'s options (the
// options object, `pipeline`, `dynamic` and its ranges, `buckets`) or a `dynamic` key that names
// no argument is an error with a did-you-mean; recompileLimit holds for sizes no bucket bounds
// (outOfRange: "recompile", past a bucket list's last edge) as it does for exact shapes.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile, type CompileOptions } from "../../compiler/index.ts";
import { DynamicShapeError } from "../../compiler/dynamic.ts";
import { nn, randn, type Tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { expectTreeClose } from "./fixtures/close.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

const fn = (x: Tensor) => x.mul(2).add(1);

class Net extends nn.Module {
  forward(inputIds: Tensor, options: { mask?: Tensor } = {}): Tensor {
    return options.mask ? inputIds.mul(options.mask) : inputIds.add(1);
  }
}

const bad = (options: unknown) => () => compile(fn, options as CompileOptions);

describe("unknown options are errors with a did-you-mean", () => {
  it("a misspelt compile() option", () => {
    expect(bad({ recompileLimt: 3 })).toThrow(TypeError);
    expect(bad({ recompileLimt: 3 })).toThrow(
      /compile: no option 'recompileLimt'; did you mean 'recompileLimit'\? \(options: backend,/,
    );
    expect(bad({ dynamc: false })).toThrow(/did you mean 'dynamic'\?/);
  });

  it("a misspelt pipeline option", () => {
    expect(bad({ pipeline: { disabel: ["cse"] } })).toThrow(
      /compile: pipeline: no option 'disabel'; did you mean 'disable'\?/,
    );
  });

  it("a dynamic key that names no argument (the issue's typo: inputs for x)", () => {
    expect(bad({ dynamic: { inputs: { 1: { max: 64 } } } })).toThrow(DynamicShapeError);
    expect(bad({ dynamic: { inputs: { 1: { max: 64 } } } })).toThrow(
      /dynamic\.inputs: no argument 'inputs'; did you mean 'x'\? \(arguments: x\)/,
    );
    expect(() => compile(new Net(), { dynamic: { inputIdz: { 1: true } } })).toThrow(
      /no argument 'inputIdz'; did you mean 'inputIds'\? \(arguments: inputIds, options\)/,
    );
  });

  it("a dynamic position past the function's arguments", () => {
    expect(bad({ dynamic: { 1: { 0: { max: 64 } } } })).toThrow(
      /dynamic\.1: no argument 1: the function takes 1 argument \(x\)/,
    );
  });

  it("unknown keys in a range and in buckets", () => {
    expect(bad({ dynamic: { x: { 0: { maxx: 64 } } } })).toThrow(
      /dynamic\.x\[0\]: no range key 'maxx'; did you mean 'max'\?/,
    );
    expect(bad({ dynamic: { x: { first: { max: 64 } } } })).toThrow(/'first' is not a dim index/);
    expect(bad({ buckets: { multiple: 8, mutliple: 4 } })).toThrow(
      /buckets: no key 'mutliple'; did you mean 'multiple'\?/,
    );
  });

  it("what is spelt right is accepted: names, positions, nested paths", () => {
    const m = compile(new Net(), {
      dynamic: { inputIds: { 1: true }, "options.mask": { 1: { max: 64 } }, 1: {} },
      pipeline: { verify: true },
      backend: "js",
    });
    const x = randn(2, 5);
    expectTreeClose(m(x), new Net().forward(x));
    expect(() => compile(fn, { dynamic: { 0: { 0: { min: 2, max: 8 } } } })).not.toThrow();
  });
});

describe("recompileLimit holds in every mode", () => {
  it('outOfRange: "recompile" specializes up to the limit, then runs eagerly', () => {
    const f = compile(fn, {
      dynamic: { x: { 0: { min: 2, max: 8 } } },
      outOfRange: "recompile",
      recompileLimit: 3,
    });
    const warn = console.warn;
    const warnings: string[] = [];
    console.warn = (m: string) => warnings.push(m);
    try {
      for (let n = 2; n < 40; n++) {
        const x = randn(n);
        expectTreeClose(f(x), fn(x));
      }
    } finally {
      console.warn = warn;
    }
    const s = f.stats;
    // The declared range's buckets (2, 3-4, 5-8) are bounded in number and do not count; the
    // sizes outside it (9, 10, 11) are one entry each, up to the limit of 3.
    const specialized = s.specializations.filter((r) =>
      /outside its declared range/.test(r.reason));
    expect(specialized.map((r) => r.call)).toEqual([8, 9, 10]);
    expect(s.compiles).toBe(6);
    expect(s.fallbacks.length).toBe(40 - 2 - 10);
    expect(s.fallbacks[0]!.reason).toMatch(/x\.shape\[0\] is 12, outside its declared range/);
    expect(warnings).toEqual([expect.stringMatching(/reached its recompile limit \(3\)/)]);
  });

  it("sizes above a bucket list's last edge count too", () => {
    const f = compile(fn, { dynamic: { x: { 0: true } }, buckets: [4], recompileLimit: 2 });
    const warn = console.warn;
    console.warn = () => {};
    try {
      for (let n = 2; n < 12; n++) f(randn(n));
    } finally {
      console.warn = warn;
    }
    // [2, 4] is one bucket; 5 and 6 are compiled exactly (the limit), 7-11 run eagerly.
    expect(f.stats.compiles).toBe(3);
    expect(f.stats.fallbacks.map((r) => r.call)).toEqual([6, 7, 8, 9, 10]);
  });
});

describe("model size specs", () => {
  it("an unknown size name in a zoo model's spec gets a did-you-mean", async () => {
    const gpt2 = await import("../../models/gpt2.ts");
    expect(() => gpt2.inputs({ seqq: 4 })).toThrow(
      "gpt2 inputs: unknown size 'seqq'; did you mean 'seq'? (sizes: batch, seq)",
    );
  });
});
