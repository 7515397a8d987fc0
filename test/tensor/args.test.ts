// The argument convention: positional arguments and one trailing options object are the same
// call; list parameters may be spread; undefined/null mean "not given"; every mistake is an
// ArgumentError naming the op and the argument. The @ts-expect-error lines check that the
// derived call types reject what the runtime rejects (tsc runs over test/).

import { describe, expect, it } from "vitest";
import { p, parseArgs } from "../../tensor/args.ts";
import { ArgumentError, ops, tensor, zeros, type Tensor } from "../../tensor/index.ts";

const x = tensor([
  [1, 2, 3],
  [4, 5, 6],
]);
const same = (a: Tensor, b: Tensor) => {
  expect(a.dtype).toBe(b.dtype);
  expect(a.shape).toEqual(b.shape);
  expect(a.toArray()).toEqual(b.toArray());
};

describe("positional == options object", () => {
  it("sum", () => {
    const expected = x.sum(1, true);
    same(x.sum({ dim: 1, keepdim: true }), expected);
    same(x.sum(1, { keepdim: true }), expected);
    same(ops.sum(x, { dim: 1, keepdim: true }), expected);
    same(ops.sum({ input: x, dim: 1, keepdim: true }), expected);
    same(x.sum(-1, true, "int32"), x.sum({ dim: -1, keepdim: true, dtype: "int32" }));
    expect(x.sum(1, true).shape).toEqual([2, 1]);
  });

  it("add with alpha, div with roundingMode", () => {
    const y = tensor([1, 1, 1]);
    same(x.add(y, 3), x.add(y, { alpha: 3 }));
    same(ops.add(x, y, 3), ops.add({ input: x, other: y, alpha: 3 }));
    same(x.div(y, "floor"), x.div(y, { roundingMode: "floor" }));
  });

  it("spread lists equal list arguments", () => {
    same(x.reshape(3, 2), x.reshape([3, 2]));
    same(x.reshape(3, 2), x.reshape({ shape: [3, 2] }));
    same(x.permute(1, 0), x.permute([1, 0]));
    same(zeros(2, 3, { dtype: "int32" }), zeros([2, 3], "int32"));
    same(zeros(2, 3), zeros({ size: [2, 3] }));
  });

  it("undefined and null mean not given", () => {
    same(x.sum(undefined, true), x.sum({ keepdim: true }));
    same(x.sum(null, false), x.sum());
    same(x.sum({ dim: undefined, keepdim: null }), x.sum());
  });
});

describe("errors name the op and the argument", () => {
  it("a bad value", () => {
    const bad = () => x.sum("a" as never);
    expect(bad).toThrow(ArgumentError);
    expect(bad).toThrow(`sum: argument 'dim' must be an integer or a list of integers, got "a"`);
    expect(() => x.sum(1, 1 as never)).toThrow(
      "sum: argument 'keepdim' must be true or false, got 1",
    );
    expect(() => x.to("float64" as never)).toThrow(/to: argument 'dtype' must be a dtype name/);
    expect(() => x.div(x, "round" as never)).toThrow(
      "div: argument 'roundingMode' must be one of 'trunc', 'floor', got \"round\"",
    );
    expect(() => ops.add([1, 2] as never, x)).toThrow(
      "add: argument 'input' must be a Tensor or a scalar, got [1, 2]",
    );
    expect(() => x.reshape(2, 1.5)).toThrow(
      "reshape: argument 'shape' must be a list of integers, got [2, 1.5]",
    );
  });

  it("unknown, duplicated, missing and surplus arguments", () => {
    expect(() => x.sum({ dims: 1 } as never)).toThrow(
      "sum: got an unknown argument 'dims' (expected one of input, dim, keepdim, dtype)",
    );
    expect(() => x.sum(1, { dim: 0 } as never)).toThrow(
      "sum: argument 'dim' was given both positionally and in the options object",
    );
    expect(() => (ops.transpose as unknown as (...a: unknown[]) => Tensor)(x, 0)).toThrow(
      "transpose: argument 'dim1' is required but was not given",
    );
    expect(() => (x.exp as unknown as (...a: unknown[]) => Tensor)(1)).toThrow(
      "exp: takes at most 1 argument (input), got 2",
    );
    const err = (() => {
      try {
        x.sum({ keepdim: "yes" } as never);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ArgumentError);
    expect((err as ArgumentError).op).toBe("sum");
    expect((err as ArgumentError).argument).toBe("keepdim");
  });
});

describe("parseArgs", () => {
  const sig = [
    p.tensor("input"),
    p.ints("size", { min: 0 }).varargs(),
    p.int("k", { min: 1 }).default(3),
    p.oneOf("mode", ["a", "b"]).optional(),
  ] as const;

  it("applies defaults and normalizes", () => {
    expect(parseArgs("f", sig, [x, 2, 3])).toEqual({
      input: x,
      size: [2, 3],
      k: 3,
      mode: undefined,
    });
    expect(parseArgs("f", sig, [x, [2], 5, "b"])).toEqual({ input: x, size: [2], k: 5, mode: "b" });
    expect(parseArgs("f", sig, [x, 4, { mode: "a" }])).toEqual({
      input: x,
      size: [4],
      k: 3,
      mode: "a",
    });
    expect(parseArgs("f", sig, [x, 2n])).toEqual({ input: x, size: [2], k: 3, mode: undefined });
  });

  it("checks bounds", () => {
    expect(() => parseArgs("f", sig, [x, [2], 0])).toThrow(
      "f: argument 'k' must be an integer >= 1, got 0",
    );
    // A spread list takes the whole run of numbers; what follows goes by name.
    expect(parseArgs("f", sig, [x, 2, 0])).toEqual({
      input: x,
      size: [2, 0],
      k: 3,
      mode: undefined,
    });
    expect(parseArgs("f", sig, [x, 2, { k: 4 }]).k).toBe(4);
    expect(() => parseArgs("f", sig, [x, [-2]])).toThrow(
      "f: argument 'size' must be a list of integers >= 0, got [-2]",
    );
  });

  it("an options object must come last", () => {
    expect(() => parseArgs("f", sig, [x, { k: 2 }, 5])).toThrow(/argument 'size' must be a list/);
  });
});

describe("call types", () => {
  it("reject what the runtime rejects", () => {
    const attempts: (() => unknown)[] = [
      // @ts-expect-error dim must be a number or a list
      () => x.sum("a"),
      // @ts-expect-error unknown option
      () => x.sum({ dims: 1 }),
      // @ts-expect-error not a dtype
      () => x.to("float64"),
      // @ts-expect-error not a rounding mode
      () => x.div(x, "round"),
      // @ts-expect-error transpose needs two dims
      () => x.transpose(0),
      // @ts-expect-error maximum takes a tensor, not a scalar
      () => x.maximum(1),
    ];
    for (const a of attempts) expect(a).toThrow(ArgumentError);
  });
});
