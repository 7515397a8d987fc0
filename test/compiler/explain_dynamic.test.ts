// explain() reports a compiled entry's dynamic dims with their buckets (read from the entry's
// range guards): declared dims show `x.shape[1] in [17, 32]`, a static entry shows none.

import { describe, expect, it } from "vitest";
import { explain, explainWith } from "../../compiler/index.ts";
import { randn, type Tensor } from "../../index.ts";

const rowSums = (x: Tensor) => x.mul(2).sum(-1);

describe("explain() and dynamic dims", () => {
  it("lists each dynamic dim with the bucket its program serves", () => {
    const e = explainWith(rowSums, { dynamic: { x: { 1: { max: 64 } } } }, randn(2, 20));
    expect(e.dynamicDims).toEqual([{ path: "x.shape[1]", lo: 17, hi: 32 }]);
    expect(String(e)).toMatch(/\n {2}dynamic dims: x\.shape\[1\] in \[17, 32\] /);
    const list = explainWith(rowSums, { dynamic: { x: { 1: true } }, buckets: [8, 48] },
      randn(3, 40));
    expect(list.dynamicDims).toEqual([{ path: "x.shape[1]", lo: 9, hi: 48 }]);
  });

  it("shows no dynamic dims for a static entry", () => {
    const e = explain(rowSums, randn(2, 20));
    expect(e.dynamicDims).toEqual([]);
    expect(String(e)).not.toMatch(/dynamic dims/);
  });
});
