// Tensor.toString: PyTorch's repr (torch/_tensor_str.py) with its default print options —
// precision 4, line width 80, summarization past 1000 elements with 3 edge items — so output
// reads like PyTorch's: `tensor([[1., 2.],\n        [3., 4.]])`, `tensor([1.5000, 2.2500])`,
// `tensor([1.0000e-05, 1.0000e+05])`, `tensor([1, 2], dtype=int32)`. Two deliberate
// differences: dtypes print by Kiln's names (`dtype=int32`, not `dtype=torch.int32`) and
// booleans as JS writes them (`true`, `false`).

import { type DType, isFloatingDType } from "./dtype.ts";
import { numelOf } from "./shape.ts";

const PRECISION = 4;
const LINE_WIDTH = 80;
const THRESHOLD = 1000;
const EDGE_ITEMS = 3;

type Value = number | bigint | boolean;

/** Python's `{:.Nf}`: fixed point, ties to even on the exact binary value. */
function fixed(v: number, digits: number): string {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  let s = v.toFixed(digits);
  if (Object.is(v, -0)) return `-${s}`;
  // toFixed rounds exact ties away from zero; Python rounds them to even.
  const scaled = Math.abs(v) * 10 ** digits;
  if (scaled - Math.floor(scaled) === 0.5 && Math.floor(scaled) % 2 === 0) {
    s = (Math.sign(v) * (Math.floor(scaled) / 10 ** digits)).toFixed(digits);
    if (v < 0 && !s.startsWith("-")) s = `-${s}`;
  }
  return s;
}

/** Python's `{:.Ne}`: `1.2346e+03` (two exponent digits at least). */
function scientific(v: number, digits: number): string {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  const s = (Object.is(v, -0) ? "-" : "") + v.toExponential(digits);
  const m = /^(-?[\d.]+)e([+-])(\d+)$/.exec(s);
  if (!m) return s;
  return `${m[1]}e${m[2]}${m[3]!.padStart(2, "0")}`;
}

class Formatter {
  private intMode = true;
  private sciMode = false;
  private maxWidth = 1;

  constructor(
    private readonly floating: boolean,
    values: readonly Value[],
  ) {
    if (!floating) {
      for (const v of values) this.maxWidth = Math.max(this.maxWidth, String(v).length);
      return;
    }
    const finite = values.map((v) => Number(v)).filter((v) => Number.isFinite(v) && v !== 0);
    if (finite.length === 0) return;
    const abs = finite.map(Math.abs);
    const min = Math.min(...abs);
    const max = Math.max(...abs);
    this.intMode = finite.every((v) => v === Math.ceil(v));
    const wide = max / min > 1000 || max > 1e8;
    if (this.intMode) {
      this.sciMode = wide;
      for (const v of finite) {
        const len = wide ? scientific(v, PRECISION).length : fixed(v, 0).length + 1;
        this.maxWidth = Math.max(this.maxWidth, len);
      }
    } else {
      this.sciMode = wide || min < 1e-4;
      for (const v of finite) {
        const s = this.sciMode ? scientific(v, PRECISION) : fixed(v, PRECISION);
        this.maxWidth = Math.max(this.maxWidth, s.length);
      }
    }
  }

  get width(): number {
    return this.maxWidth;
  }

  format(value: Value): string {
    let s: string;
    if (this.floating) {
      const v = Number(value);
      if (this.sciMode) s = scientific(v, PRECISION);
      else if (this.intMode) s = Number.isFinite(v) ? `${fixed(v, 0)}.` : fixed(v, 0);
      else s = fixed(v, PRECISION);
    } else {
      s = String(value);
    }
    return s.padStart(this.maxWidth, " ");
  }
}

/** Indices shown along a dim of `size`: all, or the edge items when summarizing. */
function shownIndices(size: number, summarize: boolean): (number | "...")[] {
  if (!summarize || size <= 2 * EDGE_ITEMS) return Array.from({ length: size }, (_, i) => i);
  const head = Array.from({ length: EDGE_ITEMS }, (_, i) => i);
  const tail = Array.from({ length: EDGE_ITEMS }, (_, i) => size - EDGE_ITEMS + i);
  return [...head, "...", ...tail];
}

/**
 * The repr of a tensor whose element i (row-major) is `at(i)`: numbers (bigint for int64,
 * booleans for bool).
 */
export function formatTensor(
  dtype: DType,
  shape: readonly number[],
  at: (i: number) => Value,
): string {
  const prefix = "tensor(";
  const indent = prefix.length;
  const numel = numelOf(shape);
  const suffixes: string[] = [];
  const defaultDType = dtype === "float32" || dtype === "int64" || dtype === "bool";
  let body: string;
  if (numel === 0) {
    if (shape.length !== 1) {
      suffixes.push(`size=(${shape.join(", ")})`);
    }
    if (dtype !== "float32") suffixes.push(`dtype=${dtype}`);
    body = "[]";
  } else {
    const summarize = numel > THRESHOLD;
    const strides: number[] = new Array<number>(shape.length);
    let acc = 1;
    for (let i = shape.length - 1; i >= 0; i--) {
      strides[i] = acc;
      acc *= shape[i]!;
    }
    // The formatter sees exactly the values that will be printed (PyTorch's summarized data).
    const shown: Value[] = [];
    const collect = (dim: number, offset: number): void => {
      if (dim === shape.length) {
        shown.push(at(offset));
        return;
      }
      for (const i of shownIndices(shape[dim]!, summarize)) {
        if (i !== "...") collect(dim + 1, offset + i * strides[dim]!);
      }
    };
    collect(0, 0);
    const fmt = new Formatter(isFloatingDType(dtype), shown);
    const render = (dim: number, offset: number, ind: number): string => {
      if (dim === shape.length) return fmt.format(at(offset));
      const rest = shape.length - dim;
      const idx = shownIndices(shape[dim]!, summarize);
      if (rest === 1) {
        const perLine = Math.max(1, Math.floor((LINE_WIDTH - ind) / (fmt.width + 2)));
        const items = idx.map((i) => (i === "..." ? " ..." : fmt.format(at(offset + i))));
        const lines: string[] = [];
        for (let k = 0; k < items.length; k += perLine) {
          lines.push(items.slice(k, k + perLine).join(", "));
        }
        return `[${lines.join(`,\n${" ".repeat(ind + 1)}`)}]`;
      }
      const parts = idx.map((i) =>
        i === "..." ? "..." : render(dim + 1, offset + i * strides[dim]!, ind + 1),
      );
      return `[${parts.join(`,${"\n".repeat(rest - 1)}${" ".repeat(ind + 1)}`)}]`;
    };
    body = render(0, 0, indent);
    if (!defaultDType) suffixes.push(`dtype=${dtype}`);
  }
  return `${prefix}${[body, ...suffixes].join(", ")})`;
}
