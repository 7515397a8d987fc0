// The element-type table's reducer identities are checked against the evaluator itself: for
// every reducer opcode and element type with an identity e, reducing [e, x] and [x, e] through
// a one-op reducer gives x bit for bit, for edge values x of the type. Both passes that need an
// identity (algebraic simplification's reduce-one, the dynamic padder's masks) read this table,
// so they cannot disagree again (they once did on s64 maximum/minimum).

import { describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import {
  ELEMENT_TYPE_INFO,
  REDUCER_OPCODES,
  reducerIdentity,
  reducerIdentityValue,
} from "../../ir/element_types.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { elementByteSize, ELEMENT_TYPES, type ElementType, isFloatType } from "../../ir/shape.ts";
import { Literal, storageCtor } from "../../ir/literal.ts";
import { identityFor } from "../../passes/dynamic_sizes.ts";

const SAMPLES: Record<ElementType, readonly (number | bigint)[]> = {
  pred: [0, 1],
  u8: [0, 1, 127, 128, 255],
  s4: [0, 1, -1, 7, -8],
  s8: [0, 1, -1, 127, -128],
  s16: [0, 1, -1, 32767, -32768],
  u4: [0, 1, 7, 8, 15],
  u16: [0, 1, 32767, 32768, 65535],
  u32: [0, 1, 2147483647, 2147483648, 4294967295],
  u64: [0n, 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n],
  token: [],
  s32: [0, 1, -1, 2147483647, -2147483648, 12345],
  s64: [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 1n << 40n],
  f32: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 3.4e38, 1e-45],
  f16: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 65504],
  bf16: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 3.3895313892515355e38],
  f64: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, Number.MAX_VALUE, 5e-324, 0.1],
  f8e5m2: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 57344, 2 ** -16],
  f8e4m3: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 240, 2 ** -9],
  f8e3m4: [0, -0, 1, -1.5, Infinity, -Infinity, NaN, 15.5, 2 ** -6],
  f8e4m3fn: [0, -0, 1, -1.5, NaN, 448, -448, 2 ** -9],
  f8e4m3fnuz: [0, 1, -1.5, NaN, 240, 2 ** -10],
  f8e5m2fnuz: [0, 1, -1.5, NaN, 57344, 2 ** -17],
  f8e4m3b11fnuz: [0, 1, -1.5, NaN, 30, 2 ** -13],
};

const BINARY_OK: Record<string, (t: ElementType) => boolean> = {
  add: (t) => t !== "token",
  multiply: (t) => t !== "token",
  maximum: (t) => t !== "token",
  minimum: (t) => t !== "token",
  and: (t) => !isFloatType(t) && t !== "token",
  or: (t) => !isFloatType(t) && t !== "token",
  xor: (t) => !isFloatType(t) && t !== "token",
};

function reduce2(op: string, t: ElementType, a: number | bigint, b: number | bigint) {
  const init = reducerIdentityValue(op, t)!;
  const mb = new ModuleBuilder("r");
  const reducer = mb.computation("red", (b) => {
    const x = b.parameter({ kind: "array", type: t, dims: [], dynamic: [] }, "x");
    const y = b.parameter({ kind: "array", type: t, dims: [], dynamic: [] }, "y");
    return b.op(op as "add", [x, y]);
  });
  mb.entry("main", (b) => {
    const p = b.parameter({ kind: "array", type: t, dims: [2], dynamic: [false] }, "p");
    return b.reduce(p, b.scalar(t, init), [0], reducer);
  });
  const data = new (storageCtor(t))(2) as unknown as { [i: number]: number | bigint };
  data[0] = a;
  data[1] = b;
  const out = evaluate(mb.build(), [new Literal(t, [2], data as never)]) as Literal;
  return out.data[0]!;
}

describe("element types", () => {
  it("the table agrees with elementByteSize and the Literal storage", () => {
    for (const t of ELEMENT_TYPES) {
      const info = ELEMENT_TYPE_INFO[t];
      expect(info.bytes).toBe(elementByteSize(t));
      expect(info.float).toBe(isFloatType(t));
      expect(storageCtor(t).name).toBe(info.storage);
      expect(storageCtor(t).BYTES_PER_ELEMENT).toBe(info.storageBytes);
    }
  });

  for (const op of REDUCER_OPCODES) {
    for (const t of ELEMENT_TYPES) {
      if (!BINARY_OK[op]!(t)) {
        it(`${op} has no identity on ${t}`, () => expect(reducerIdentity(op, t)).toBeUndefined());
        continue;
      }
      it(`${op} on ${t}: the identity is exact on both sides`, () => {
        const e = reducerIdentity(op, t);
        expect(e).toBeDefined();
        // The padder's identity is the same value.
        expect(identityFor(op, t)).toEqual(reducerIdentityValue(op, t));
        for (const x of SAMPLES[t]) {
          const stored = new (storageCtor(t))(1) as unknown as { [i: number]: number | bigint };
          stored[0] = x;
          const want = stored[0]!;
          expect(Object.is(reduce2(op, t, e!, x), want) || reduce2(op, t, e!, x) === want).toBe(
            true,
          );
          const r = reduce2(op, t, x, e!);
          expect(Object.is(r, want) || r === want).toBe(true);
        }
      });
    }
  }
});
