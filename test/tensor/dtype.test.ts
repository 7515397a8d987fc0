// dtypes and PyTorch's type promotion: the promote_types table, torch.result_type's priority
// levels (dimensioned > zero-dim > scalar, unless a lower level is of a higher category), and
// that binary ops follow result_type. Expected dtypes are PyTorch's documented behavior.

import { describe, expect, it } from "vitest";
import {
  add,
  DTYPES,
  type DType,
  mul,
  promoteTypes,
  resultType,
  type Scalar,
  type Tensor,
  tensor,
  zeros,
} from "../../tensor/index.ts";

const B = "bool";
const U8 = "uint8";
const I32 = "int32";
const I64 = "int64";
const F16 = "float16";
const BF = "bfloat16";
const F32 = "float32";

// torch.promote_types over Kiln's dtypes, row by row (symmetric).
const PROMOTE: Record<DType, Record<DType, DType>> = {
  bool: { bool: B, uint8: U8, int32: I32, int64: I64, float16: F16, bfloat16: BF, float32: F32 },
  uint8: { bool: U8, uint8: U8, int32: I32, int64: I64, float16: F16, bfloat16: BF, float32: F32 },
  int32: {
    bool: I32,
    uint8: I32,
    int32: I32,
    int64: I64,
    float16: F16,
    bfloat16: BF,
    float32: F32,
  },
  int64: {
    bool: I64,
    uint8: I64,
    int32: I64,
    int64: I64,
    float16: F16,
    bfloat16: BF,
    float32: F32,
  },
  float16: {
    bool: F16,
    uint8: F16,
    int32: F16,
    int64: F16,
    float16: F16,
    bfloat16: F32,
    float32: F32,
  },
  bfloat16: { bool: BF, uint8: BF, int32: BF, int64: BF, float16: F32, bfloat16: BF, float32: F32 },
  float32: {
    bool: F32,
    uint8: F32,
    int32: F32,
    int64: F32,
    float16: F32,
    bfloat16: F32,
    float32: F32,
  },
};

const dimT = (dtype: DType): Tensor => zeros([2], { dtype });
const zeroT = (dtype: DType): Tensor => zeros([], { dtype });

// [operands, torch.result_type]
const RESULT_TYPE: [string, (Tensor | Scalar)[], DType][] = [
  ["int32 tensor + float scalar", [dimT(I32), 1.5], F32],
  ["uint8 tensor + int64 zero-dim", [dimT(U8), zeroT(I64)], U8],
  ["int32 tensor + int64 zero-dim", [dimT(I32), zeroT(I64)], I32],
  ["int32 tensor + int scalar", [dimT(I32), 5], I32],
  ["uint8 tensor + large int scalar", [dimT(U8), 1000], U8],
  ["bool tensor + int scalar", [dimT(B), 1], I64],
  ["bool tensor + bool scalar", [dimT(B), true], B],
  ["bool tensor + float scalar", [dimT(B), 1.5], F32],
  ["float16 tensor + float scalar", [dimT(F16), 1.5], F16],
  ["float16 tensor + float32 zero-dim", [dimT(F16), zeroT(F32)], F16],
  ["float16 tensor + float32 tensor", [dimT(F16), dimT(F32)], F32],
  ["float16 tensor + bfloat16 tensor", [dimT(F16), dimT(BF)], F32],
  ["bfloat16 tensor + float16 zero-dim", [dimT(BF), zeroT(F16)], BF],
  ["int32 zero-dim + float scalar", [zeroT(I32), 1.5], F32],
  ["int64 zero-dim + int32 zero-dim", [zeroT(I64), zeroT(I32)], I64],
  ["int32 tensor + float32 zero-dim", [dimT(I32), zeroT(F32)], F32],
  ["uint8 tensor + bool zero-dim", [dimT(U8), zeroT(B)], U8],
  ["bool tensor + uint8 zero-dim", [dimT(B), zeroT(U8)], U8],
  ["int32 tensor + bool scalar", [dimT(I32), true], I32],
  ["two int scalars", [1, 2], I64],
  ["int and float scalars", [1, 2.5], F32],
  ["two bool scalars", [true, false], B],
  ["bigint scalar", [dimT(B), 3n], I64],
  ["int32 tensor + integral number beyond 2^53 (a float scalar)", [dimT(I32), 2 ** 60], F32],
  ["uint8 zero-dim + int32 zero-dim", [zeroT(U8), zeroT(I32)], I32],
  ["float32 zero-dim + float16 tensor + int scalar", [zeroT(F32), dimT(F16), 3], F16],
];

describe("promoteTypes", () => {
  it("matches torch.promote_types for every pair", () => {
    for (const a of DTYPES) {
      for (const b of DTYPES) {
        expect(promoteTypes(a, b), `${a} + ${b}`).toBe(PROMOTE[a][b]);
      }
    }
  });
});

describe("resultType", () => {
  it.each(RESULT_TYPE)("%s", (_name, operands, expected) => {
    expect(resultType(...operands)).toBe(expected);
  });

  it("binary ops follow it (add; mul for bool results)", () => {
    for (const [name, operands, expected] of RESULT_TYPE) {
      if (operands.length !== 2) continue;
      const [a, b] = operands as [Tensor | Scalar, Tensor | Scalar];
      if (typeof a !== "object" && typeof b !== "object") continue; // add needs a tensor to run
      const out = expected === "bool" ? mul(a, b) : add(a, b);
      expect(out.dtype, name).toBe(expected);
    }
  });

  it("needs an operand", () => {
    expect(() => resultType()).toThrow(/at least one operand/);
  });

  it("JS number arrays are float32, bigints int64, booleans bool", () => {
    expect(tensor([1, 2]).dtype).toBe("float32");
    expect(tensor([1n, 2n]).dtype).toBe("int64");
    expect(tensor([true]).dtype).toBe("bool");
  });
});
