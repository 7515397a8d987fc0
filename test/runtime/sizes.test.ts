// Zero-size and impossible sizes on every registered backend. Zero-size values that feed a pad
// or a concatenate (a reshape of zero elements once sent the kernel lowering into an endless
// loop that aborted the Node process) give what eager and the evaluator give, compiled, lazy
// and as HLO. A shape no array can hold is an error naming the op, the element count and the
// bytes requested on each backend (UnsupportedError at compile; the interpreter's EvalError),
// never a bare RangeError from a typed-array constructor (the evaluator's and the creation
// ops' own errors are tested in test/ir/evaluate.test.ts and test/tensor/creation.test.ts).

import { describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { EvalError } from "../../ir/errors.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { backendNames, compileModule, getBackend, UnsupportedError } from "../../runtime/index.ts";
import { cat, lazy, ops, setEagerBackend, type Tensor, zeros } from "../../tensor/index.ts";

const RESHAPE_EMPTY_THEN_PAD = `HloModule reshape_empty_then_pad
ENTRY e {
  p = f32[2,0] parameter(0)
  r = f32[0] reshape(p)
  z = f32[] constant(7)
  ROOT q = f32[2] pad(r, z), padding=2_0
}`;

const RESHAPE_EMPTY_INNER = `HloModule reshape_empty_inner
ENTRY e {
  p = f32[0,3] parameter(0)
  r = f32[3,0,1] reshape(p)
  t = f32[0,3,1] transpose(r), dimensions={1,0,2}
  z = f32[] constant(-1)
  ROOT q = f32[1,3,2] pad(t, z), padding=1_0x0_0x1_0
}`;

const CONCAT_EMPTY_THEN_PAD = `HloModule concat_empty_then_pad
ENTRY e {
  a = f32[0] parameter(0)
  b = f32[0] parameter(1)
  c = f32[0] concatenate(a, b), dimensions={0}
  z = f32[] constant(3)
  ROOT q = f32[1] pad(c, z), padding=1_0
}`;

const empty = (dims: number[]): Literal => literal("f32", dims, []);

describe.each(backendNames())("zero-size values on %s", (backend) => {
  it.each([
    ["a reshape of zero elements, padded", RESHAPE_EMPTY_THEN_PAD, [empty([2, 0])], [7, 7]],
    ["a reshape of zero elements to rank 3", RESHAPE_EMPTY_INNER, [empty([0, 3])], [-1, -1, -1,
      -1, -1, -1]],
    ["a concatenate of empty operands, padded", CONCAT_EMPTY_THEN_PAD, [empty([0]), empty([0])],
      [3]],
  ] as const)("%s: as the evaluator", (_what, text, inputs, want) => {
    const m = parseHlo(text);
    const ref = evaluate(m, [...inputs]) as Literal;
    expect([...ref.data]).toEqual(want);
    for (const optimize of [false, true]) {
      const exe = compileModule(m, { backend, cache: false, optimize }).executable;
      const got = exe.run([...inputs]) as Literal;
      expect(got.dims).toEqual(ref.dims);
      expect([...got.data]).toEqual(want);
    }
  });

  const padded = (x: Tensor) => ops.pad(x.reshape(0), [2, 0]);
  const catPadded = (x: Tensor) => ops.pad(cat([x.reshape(0), x.reshape(0)]), [1, 0]);
  it.each([
    ["pad(reshape(zeros(2, 0)))", padded, [0, 0]],
    ["pad(cat(empty, empty))", catPadded, [0]],
  ] as const)("%s: compiled and lazy as eager", (_what, f, want) => {
    setEagerBackend(backend);
    try {
      expect(f(zeros(2, 0)).toArray()).toEqual(want);
      expect(lazy(() => f(zeros(2, 0)).toArray(), { backend, cache: false })).toEqual(want);
      const g = compile(f, { backend });
      const r = g(zeros(2, 0));
      expect(r.shape).toEqual([want.length]);
      expect(r.toArray()).toEqual(want);
    } finally {
      setEagerBackend(undefined);
    }
  });
});

const BROADCAST_HUGE = `HloModule broadcast_huge
ENTRY e {
  z = f32[] constant(0)
  ROOT b = f32[99999999999] broadcast(z), dimensions={}
}`;

// 99999999999 f32 elements of 4 bytes each.
const HUGE = /99999999999 f32 elements \(399999999996 bytes\) requested/;

describe("impossible sizes on every backend", () => {
  it.each(backendNames())("%s: a clear error at compile or run, never a RangeError", (b) => {
    const m = parseHlo(BROADCAST_HUGE);
    let err: unknown;
    try {
      getBackend(b).compile(m).run([]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(b === "interpreter" ? EvalError : UnsupportedError);
    expect((err as Error).message).toMatch(/%b/);
    expect((err as Error).message).toMatch(/broadcast/);
    expect((err as Error).message).toMatch(HUGE);
  });

});
