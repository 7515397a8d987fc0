// Element expressions: the value of an instruction at a symbolic index, as JavaScript. This is
// what every `js` kernel is made of: elementwise ops become inline arithmetic with the
// evaluator's exact rounding (f32 through Math.fround after every op, f16/bf16 through the
// rounding helpers of ir/literal.ts, s32 through |0 and Math.imul), and broadcast, transpose,
// reshape, slice, reverse, pad, concatenate, iota and dynamic-slice become index arithmetic over
// their operands (nothing is materialized). A read of a kernel input (a leaf) is
// `x[base + i * stride]` with the base hoisted by the emitter. Ops with awkward corner cases
// (integer division, power, shifts, s64 arithmetic, TOTALORDER compares, float-to-int
// converts) call the evaluator's own scalar kernels, so the two paths cannot disagree.

import {
  binaryKernel,
  compareKernel,
  converter,
  erf,
  isBinaryName,
  isUnaryName,
  unaryKernel,
} from "../../ir/evaluate_elementwise.ts";
import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Instruction } from "../../ir/module.ts";
import { OPCODE_INFO, OPCODES } from "../../ir/opcodes.ts";
import type { ArrayShape, ElementType } from "../../ir/shape.ts";
import {
  type Affine,
  affAdd,
  affAddK,
  affConst,
  affKey,
  affScale,
  affSym,
  affVal,
  type Block,
  type ExtTable,
  type FnBuilder,
  numLit,
  type Val,
} from "./emitter.ts";
import { clampF, clampI, clampIndex } from "./runtime_lib.ts";

/** A fusion (or kernel) the fast generators cannot map: the caller falls back, saying why. */
export class NotFast extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "NotFast";
  }
}

/** Where a kernel reads an instruction's value instead of computing it. */
export type Leaf =
  /** A typed array in row-major order (`onRead` sees every index it is read at). */
  | { kind: "array"; arr: Val; dims: readonly number[]; onRead?: (idx: readonly Affine[]) => void }
  /** Scalar values already in variables (reducer parameters); several for a tuple. */
  | { kind: "scalars"; vals: readonly Val[] }
  /** Results of a row reduction, valid only at the row being processed (index `idx`). */
  | { kind: "row"; vals: readonly Val[]; idx: readonly Affine[] };

export function arrayOf(instr: Instruction): ArrayShape {
  if (instr.shape.kind !== "array") {
    throw new NotFast(`%${instr.name} (${instr.opcode}) has a tuple shape`);
  }
  return instr.shape;
}

export function stridesOf(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length);
  let acc = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= dims[i]!;
  }
  return s;
}

export function isFloatT(t: ElementType): boolean {
  return t === "f32" || t === "f16" || t === "bf16";
}

/** A scalar literal value as JavaScript source of its stored form. */
function scalarCode(t: ElementType, v: number | bigint): string {
  if (t === "s64") return `${String(v)}n`;
  return numLit(Number(v));
}

/**
 * The opcodes an element expression can contain: every elementwise opcode of the opcode table
 * except bitcast-convert (it reinterprets bytes, not values), plus the leaves and the movement
 * ops that become index arithmetic.
 */
const EXPRESSIBLE: ReadonlySet<string> = new Set<string>([
  ...OPCODES.filter((op) => OPCODE_INFO[op].elementwise && op !== "bitcast-convert"),
  "parameter",
  "constant",
  "iota",
  "broadcast",
  "reshape",
  "transpose",
  "slice",
  "dynamic-slice",
  "concatenate",
  "pad",
  "reverse",
  "get-tuple-element",
  "get-dimension-size",
]);

export function isExpressible(instr: Instruction): boolean {
  return EXPRESSIBLE.has(instr.opcode);
}

/** Generates the value of instructions at symbolic indices inside one kernel function. */
export class ExprGen {
  private readonly memo = new Map<string, Val>();

  constructor(
    readonly fn: FnBuilder,
    readonly ext: ExtTable,
    readonly leaves: Map<Instruction, Leaf>,
  ) {}

  /**
   * The value of `instr` at `idx` (one affine index per dim), emitted for use in block `at`.
   * With `inline` (inside a pad/concatenate branch) nothing is bound or hoisted, so a branch
   * not taken reads nothing.
   */
  value(instr: Instruction, idx: readonly Affine[], at: Block, inline: boolean): Val {
    const leaf = this.leaves.get(instr);
    if (leaf) return this.readLeaf(instr, leaf, idx, at, inline);
    const key = `${instr.id}@${idx.map(affKey).join(",")}`;
    if (!inline) {
      const m = this.memo.get(key);
      if (m && m.block.isAncestorOf(at)) return m;
    }
    const v = this.compute(instr, idx, at, inline);
    if (inline) return v;
    const b = this.fn.bind(v, at, "v");
    this.memo.set(key, b);
    return b;
  }

  private readLeaf(
    instr: Instruction,
    leaf: Leaf,
    idx: readonly Affine[],
    at: Block,
    inline: boolean,
  ): Val {
    switch (leaf.kind) {
      case "array": {
        leaf.onRead?.(idx);
        const strides = stridesOf(leaf.dims);
        let lin = affConst(0);
        idx.forEach((a, k) => (lin = affAdd(lin, affScale(a, strides[k]!))));
        const li = affVal(this.fn, lin, at);
        const v = this.fn.expr(`${leaf.arr.code}[${li.code}]`, [leaf.arr, li]);
        return inline ? v : this.fn.bind(v, at, "x");
      }
      case "scalars":
        if (leaf.vals.length !== 1) {
          throw new NotFast(`%${instr.name} is a tuple of ${leaf.vals.length} scalars`);
        }
        return leaf.vals[0]!;
      case "row": {
        const want = leaf.idx.map(affKey).join(",");
        if (idx.map(affKey).join(",") !== want || leaf.vals.length !== 1) {
          throw new NotFast(
            `the reduce %${instr.name} is read at another row than the one being reduced`,
          );
        }
        return leaf.vals[0]!;
      }
      default: {
        const never: never = leaf;
        throw new Error(`unknown leaf ${String(never)}`);
      }
    }
  }

  private compute(instr: Instruction, idx: readonly Affine[], at: Block, inline: boolean): Val {
    const op = instr.opcode;
    const sub = (i: number, ix: readonly Affine[], inl = inline) =>
      this.value(instr.operand(i), ix, at, inl);
    switch (op) {
      case "parameter":
        throw new NotFast(`parameter %${instr.name} has no value in this kernel`);
      case "constant": {
        const lit = instr.attrs.literal!;
        if (lit.dims.length === 0) return this.fn.atom(scalarCode(lit.type, lit.data[0]!));
        const arr = this.fn.atom(this.ext.ref(lit.data, `data of %${instr.name}`));
        return this.readLeaf(instr, { kind: "array", arr, dims: lit.dims }, idx, at, inline);
      }
      case "iota": {
        const s = arrayOf(instr);
        const i = affVal(this.fn, idx[instr.attrs.iotaDimension!]!, at);
        return this.fromIndex(s.type, i);
      }
      case "broadcast": {
        const map = instr.attrs.dimensions!;
        return sub(
          0,
          map.map((r) => idx[r]!),
        );
      }
      case "transpose": {
        const perm = instr.attrs.dimensions!;
        const ix = new Array<Affine>(perm.length);
        perm.forEach((p, k) => (ix[p] = idx[k]!));
        return sub(0, ix);
      }
      case "reshape":
        return sub(
          0,
          this.reshapeIndex(arrayOf(instr).dims, arrayOf(instr.operand(0)).dims, idx, at),
        );
      case "slice": {
        const sl = instr.attrs.slice!;
        return sub(
          0,
          sl.map((s, k) => affAddK(affScale(idx[k]!, s.stride), s.start)),
        );
      }
      case "reverse": {
        const rev = new Set(instr.attrs.dimensions!);
        const dims = arrayOf(instr).dims;
        return sub(
          0,
          idx.map((a, k) => (rev.has(k) ? affAddK(affScale(a, -1), dims[k]! - 1) : a)),
        );
      }
      case "dynamic-slice": {
        const x = arrayOf(instr.operand(0));
        const sizes = instr.attrs.dynamicSliceSizes!;
        const ix = idx.map((a, k) => {
          const s = this.value(instr.operand(k + 1), [], at, false);
          const hi = x.dims[k]! - sizes[k]!;
          const ci = this.ext.ref(clampIndex, "clampIndex");
          const st = this.fn.bind(this.fn.expr(`${ci}(${s.code}, ${hi})`, [s]), at, "s");
          return affAdd(a, affSym(st));
        });
        return sub(0, ix);
      }
      case "pad":
        return this.pad(instr, idx, at, inline);
      case "concatenate":
        return this.concatenate(instr, idx, at);
      case "get-dimension-size": {
        // Static shapes only reach code generation: the size is a constant.
        const d = instr.attrs.dimensions![0]!;
        return this.fn.atom(String(arrayOf(instr.operand(0)).dims[d]!));
      }
      case "get-tuple-element": {
        const t = instr.operand(0);
        const leaf = this.leaves.get(t);
        const i = instr.attrs.tupleIndex!;
        if (leaf?.kind === "scalars") return leaf.vals[i]!;
        if (leaf?.kind === "row") {
          const want = leaf.idx.map(affKey).join(",");
          if (idx.map(affKey).join(",") !== want) {
            throw new NotFast(`the reduce %${t.name} is read at another row than it reduces`);
          }
          return leaf.vals[i]!;
        }
        throw new NotFast(`get-tuple-element %${instr.name} of a computed tuple`);
      }
      default:
        break;
    }
    if (!EXPRESSIBLE.has(op)) {
      throw new NotFast(`%${instr.name} (${op}) is not an elementwise or data-movement op`);
    }
    // Elementwise: operands at the same index (a scalar operand of select/clamp at []).
    const rank = idx.length;
    const args = instr.operands.map((o, i) => {
      const s = arrayOf(o);
      return sub(i, s.dims.length === 0 && rank > 0 ? [] : idx);
    });
    return this.elementwise(instr, args);
  }

  /** An integer index value converted to the element type (iota). */
  private fromIndex(t: ElementType, i: Val): Val {
    const e = (code: string) => this.fn.expr(code, [i]);
    switch (t) {
      case "s32":
        // Parenthesized: `b + i` may land inside a larger expression (a pad branch).
        return i.atom ? i : e(`(${i.code})`);
      case "s64":
        return e(`BigInt(${i.code})`);
      case "pred":
        return e(`(${i.code} !== 0 ? 1 : 0)`);
      case "u8":
        return e(`(${i.code} & 255)`);
      case "f32":
      case "f16":
      case "bf16":
        return e(this.round(t, i.code));
      default: {
        const never: never = t;
        throw new Error(`unknown element type ${String(never)}`);
      }
    }
  }

  /**
   * Operand indices of a reshape. Dims are grouped where the running products of both sides
   * meet; a group whose operand side is one dim maps affinely, otherwise the group's linear
   * index is split with division and remainder.
   */
  private reshapeIndex(
    res: readonly number[],
    opd: readonly number[],
    idx: readonly Affine[],
    at: Block,
  ): Affine[] {
    const out = new Array<Affine>(opd.length).fill(affConst(0));
    const rs = res.map((_, i) => i).filter((i) => res[i] !== 1);
    const os = opd.map((_, i) => i).filter((i) => opd[i] !== 1);
    let i = 0;
    let j = 0;
    while (i < rs.length && j < os.length) {
      const gi = [rs[i++]!];
      const gj = [os[j++]!];
      let pr = res[gi[0]!]!;
      let po = opd[gj[0]!]!;
      while (pr !== po) {
        if (pr < po) {
          const d = rs[i++]!;
          gi.push(d);
          pr *= res[d]!;
        } else {
          const d = os[j++]!;
          gj.push(d);
          po *= opd[d]!;
        }
      }
      let lin = affConst(0);
      let stride = 1;
      for (let k = gi.length - 1; k >= 0; k--) {
        lin = affAdd(lin, affScale(idx[gi[k]!]!, stride));
        stride *= res[gi[k]!]!;
      }
      if (gj.length === 1) {
        out[gj[0]!] = lin;
        continue;
      }
      const l = affVal(this.fn, lin, at);
      const lv = this.fn.bind(l, at, "q");
      let inner = 1;
      for (let k = gj.length - 1; k >= 0; k--) {
        const d = opd[gj[k]!]!;
        const q = inner === 1 ? lv.code : `Math.floor(${lv.code} / ${inner})`;
        const code = k === 0 ? q : `(${q} % ${d})`;
        out[gj[k]!] = affSym(this.fn.bind(this.fn.expr(code, [lv]), at, "q"));
        inner *= d;
      }
    }
    return out;
  }

  private pad(instr: Instruction, idx: readonly Affine[], at: Block, inline: boolean): Val {
    const x = arrayOf(instr.operand(0));
    const res = arrayOf(instr);
    const cfg = instr.attrs.padding!;
    const conds: string[] = [];
    const deps: Val[] = [];
    const ix = cfg.map((p, k) => {
      const n = x.dims[k]!;
      const q = affAddK(idx[k]!, -p.low);
      const size = res.dims[k]!;
      if (p.interior === 0) {
        // q runs over [-low, size - 1 - low]; test only the ends that can fall outside.
        const lo = -p.low;
        const hi = size - 1 - p.low;
        if (lo >= 0 && hi < n) return q;
        const qv = affVal(this.fn, q, at);
        const qb = this.fn.bind(qv, at, "q");
        deps.push(qb);
        if (lo < 0) conds.push(`${qb.code} >= 0`);
        if (hi >= n) conds.push(`${qb.code} < ${n}`);
        return affSym(qb);
      }
      const qb = this.fn.bind(affVal(this.fn, q, at), at, "q");
      const m = p.interior + 1;
      const s = this.fn.bind(this.fn.expr(`Math.floor(${qb.code} / ${m})`, [qb]), at, "q");
      deps.push(qb, s);
      conds.push(`${qb.code} >= 0`, `${qb.code} % ${m} === 0`, `${s.code} < ${n}`);
      return affSym(s);
    });
    if (conds.length === 0) return this.value(instr.operand(0), ix, at, inline);
    const padv = this.value(instr.operand(1), [], at, false);
    const inner = this.value(instr.operand(0), ix, at, true);
    const code = `(${conds.join(" && ")} ? ${inner.code} : ${padv.code})`;
    return this.fn.expr(code, [...deps, padv, inner]);
  }

  private concatenate(instr: Instruction, idx: readonly Affine[], at: Block): Val {
    const d = instr.attrs.dimensions![0]!;
    const parts = instr.operands;
    if (parts.length === 1) return this.value(parts[0]!, idx, at, false);
    const di = this.fn.bind(affVal(this.fn, idx[d]!, at), at, "q");
    let off = 0;
    const branches: { limit: number; v: Val }[] = [];
    for (const p of parts) {
      const size = arrayOf(p).dims[d]!;
      if (size > 0) {
        const ix = idx.map((a, k) => (k === d ? affAddK(affSym(di), -off) : a));
        branches.push({ limit: off + size, v: this.value(p, ix, at, true) });
      }
      off += size;
    }
    let code = branches[branches.length - 1]!.v.code;
    for (let k = branches.length - 2; k >= 0; k--) {
      code = `(${di.code} < ${branches[k]!.limit} ? ${branches[k]!.v.code} : ${code})`;
    }
    return this.fn.expr(code, [di, ...branches.map((b) => b.v)]);
  }

  // ---- elementwise semantics -----------------------------------------------------------------

  private round(t: ElementType, code: string): string {
    if (t === "f32") return `Math.fround(${code})`;
    if (t === "f16") return `${this.ext.ref(roundToF16, "roundToF16")}(${code})`;
    if (t === "bf16") return `${this.ext.ref(roundToBF16, "roundToBF16")}(${code})`;
    return code;
  }

  private kern1(op: string, t: ElementType): string {
    if (!isUnaryName(op)) throw new Error(`no unary kernel for ${op}`);
    return this.ext.ref(unaryKernel(op, t), `${op} kernel (${t})`);
  }

  private kern2(op: string, t: ElementType): string {
    if (!isBinaryName(op)) throw new Error(`no binary kernel for ${op}`);
    return this.ext.ref(binaryKernel(op, t), `${op} kernel (${t})`);
  }

  private elementwise(instr: Instruction, args: Val[]): Val {
    const op = instr.opcode;
    const rt = arrayOf(instr).type;
    const t = arrayOf(instr.operand(op === "select" || op === "clamp" ? 1 : 0)).type;
    const e = (code: string) => this.fn.expr(code, args);
    const a = args[0]!.code;
    const b = args[1]?.code ?? "";
    const atoms = args.every((v) => v.atom);
    const float = isFloatT(t);
    const R = (code: string) => e(this.round(t, code));
    const k1 = () => e(`${this.kern1(op, t)}(${a})`);
    const k2 = () => e(`${this.kern2(op, t)}(${a}, ${b})`);
    const mathF = (f: string) => R(`Math.${f}(${a})`);
    switch (op) {
      case "abs":
        if (float) return e(`Math.abs(${a})`);
        if (t === "s32") return atoms ? e(`(${a} < 0 ? -(${a}) | 0 : ${a})`) : k1();
        return t === "s64" ? k1() : args[0]!;
      case "negate":
        if (float) return e(`(-(${a}))`);
        if (t === "s32") return e(`(-(${a}) | 0)`);
        if (t === "u8") return e(`(-(${a}) & 255)`);
        return t === "s64" ? k1() : args[0]!;
      case "sign":
        if (t === "u8") return e(`(${a} > 0 ? 1 : 0)`);
        if (t === "pred") return args[0]!;
        if (t === "s64" || !atoms) return k1();
        return e(`(${a} > 0 ? 1 : ${a} < 0 ? -1 : ${float ? a : "0"})`);
      case "exponential":
        return mathF("exp");
      case "exponential-minus-one":
        return mathF("expm1");
      case "log":
        return mathF("log");
      case "log-plus-one":
        return mathF("log1p");
      case "sqrt":
        return mathF("sqrt");
      case "rsqrt":
        return R(`1 / Math.sqrt(${a})`);
      case "cbrt":
        return mathF("cbrt");
      case "tanh":
        return mathF("tanh");
      case "logistic":
        return R(`1 / (1 + Math.exp(-(${a})))`);
      case "sine":
        return mathF("sin");
      case "cosine":
        return mathF("cos");
      case "tan":
        return mathF("tan");
      case "erf":
        return R(`${this.ext.ref(erf, "erf")}(${a})`);
      case "floor":
        return e(`Math.floor(${a})`);
      case "ceil":
        return e(`Math.ceil(${a})`);
      case "round-nearest-afz":
      case "round-nearest-even":
        return k1();
      case "is-finite":
        return e(`(Number.isFinite(${a}) ? 1 : 0)`);
      case "not":
        if (t === "s32") return e(`(~(${a}))`);
        if (t === "u8") return e(`(~(${a}) & 255)`);
        if (t === "pred") return e(`(1 - (${a}))`);
        return k1();
      case "copy":
        return args[0]!;
      case "convert":
        return this.convert(t, rt, args[0]!);
      case "add":
      case "subtract": {
        const sym = op === "add" ? "+" : "-";
        if (float) return R(`${a} ${sym} ${b}`);
        if (t === "s32") return e(`((${a} ${sym} ${b}) | 0)`);
        if (t === "u8") return e(`((${a} ${sym} ${b}) & 255)`);
        if (t === "pred") return e(`(${a} ${op === "add" ? "|" : "^"} ${b})`);
        return k2();
      }
      case "multiply":
        if (float) return R(`${a} * ${b}`);
        if (t === "s32") return e(`Math.imul(${a}, ${b})`);
        if (t === "u8") return e(`((${a} * ${b}) & 255)`);
        if (t === "pred") return e(`(${a} & ${b})`);
        return k2();
      case "divide":
        return float ? R(`${a} / ${b}`) : k2();
      case "remainder":
        return float ? R(`${a} % ${b}`) : k2();
      case "power":
        return float ? R(`${this.kern2(op, t)}(${a}, ${b})`) : k2();
      case "maximum":
      case "minimum": {
        // std::max / std::min: NaN propagates; otherwise ties (-0 vs +0) keep the lhs.
        if (!atoms) return k2();
        const pick = op === "maximum" ? `${a} < ${b} ? ${b} : ${a}` : `${b} < ${a} ? ${b} : ${a}`;
        if (float) return e(`(${a} !== ${a} ? ${a} : ${b} !== ${b} ? ${b} : ${pick})`);
        return e(`(${pick})`);
      }
      case "atan2":
        return R(`Math.atan2(${a}, ${b})`);
      case "and":
        return e(`(${a} & ${b})`);
      case "or":
        return e(`(${a} | ${b})`);
      case "xor":
        return e(`(${a} ^ ${b})`);
      case "shift-left":
      case "shift-right-arithmetic":
      case "shift-right-logical":
        return k2();
      case "compare": {
        const dir = instr.attrs.direction!;
        const ct = instr.attrs.comparisonType;
        if (float && ct === "TOTALORDER") {
          const k = this.ext.ref(compareKernel(t, dir, ct), `compare ${dir} TOTALORDER (${t})`,
            `cmp:${t}:${dir}:TOTALORDER`);
          return e(`${k}(${a}, ${b})`);
        }
        const js = { EQ: "===", NE: "!==", LT: "<", LE: "<=", GT: ">", GE: ">=" }[dir];
        return e(`(${a} ${js} ${b} ? 1 : 0)`);
      }
      case "select":
        return e(`(${a} ? ${b} : ${args[2]!.code})`);
      case "clamp": {
        const f = float ? this.ext.ref(clampF, "clampF") : this.ext.ref(clampI, "clampI");
        return e(`${f}(${a}, ${b}, ${args[2]!.code})`);
      }
      default:
        throw new NotFast(`%${instr.name} (${op}) is not elementwise`);
    }
  }

  /** convert: the evaluator's converter, inline where it is one JS operation. */
  private convert(from: ElementType, to: ElementType, x: Val): Val {
    const e = (code: string) => this.fn.expr(code, [x]);
    if (from === to) return x;
    const helper = () => {
      const f = this.ext.ref(converter(from, to), `convert ${from}->${to}`, `conv:${from}:${to}`);
      return e(`${f}(${x.code})`);
    };
    if (from === "s64") return helper();
    if (to === "pred") return e(`(${x.code} !== 0 ? 1 : 0)`);
    if (isFloatT(from)) {
      if (to === "f32") return x;
      if (to === "f16" || to === "bf16") return e(this.round(to, x.code));
      return helper();
    }
    switch (to) {
      case "f32":
      case "f16":
      case "bf16":
        return e(this.round(to, x.code));
      case "s32":
        return e(`(${x.code} | 0)`);
      case "u8":
        return e(`(${x.code} & 255)`);
      case "s64":
        return e(`BigInt(${x.code})`);
      default:
        return helper();
    }
  }
}
