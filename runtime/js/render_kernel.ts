// The js renderer of kernel IR: a scheduled kernel (runtime/kernel/schedule.ts) as one
// JavaScript function `k(b0.., s0.., lo0, hi0[, lo1, hi1])` over typed arrays. Elementwise ops
// render with the evaluator's exact rounding (f32 through Math.fround after every op, f16/bf16
// through the rounding helpers of ir/literal.ts, s32 through |0 and Math.imul); the awkward
// corners (integer division, power, shifts, s64 arithmetic, TOTALORDER compares, float-to-int
// converts) call the evaluator's own scalar kernels, so the two cannot disagree. Values external
// to the source (those kernels, rounding helpers, clamps) go through the module's ExtTable.

import {
  binaryKernel,
  compareKernel,
  converter,
  erf,
  isBinaryName,
  isUnaryName,
  unaryKernel,
} from "../../ir/evaluate_elementwise.ts";
import { elementInfo } from "../../ir/element_types.ts";
import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { ElementType } from "../../ir/shape.ts";
import { isIx, type Ix, type Node } from "../kernel/kir.ts";
import { baseOps, type OpArgs, type OpTable } from "../kernel/ops.ts";
import type { Expr, SCmp, ScheduledKernel, SStmt } from "../kernel/schedule.ts";
import { commentText, type ExtTable, numLit } from "./emitter.ts";
import { clampF, clampI } from "./runtime_lib.ts";

/** A scalar literal value as JavaScript source of its stored form. */
function scalarCode(t: ElementType, v: number | bigint): string {
  if (t === "s64") return `${String(v)}n`;
  return numLit(Number(v));
}

/** The JavaScript op table over an ExtTable (helpers are listed in it on first use). */
export function jsOps(ext: ExtTable): OpTable {
  const round = (t: ElementType, code: string): string => {
    if (t === "f32") return `Math.fround(${code})`;
    if (t === "f16") return `${ext.ref(roundToF16, "roundToF16")}(${code})`;
    if (t === "bf16") return `${ext.ref(roundToBF16, "roundToBF16")}(${code})`;
    return code;
  };
  const k1 = (o: OpArgs): string => {
    const op = o.node.opcode;
    if (!isUnaryName(op)) throw new Error(`no unary kernel for ${op}`);
    return `${ext.ref(unaryKernel(op, o.argType), `${op} kernel (${o.argType})`)}(${o.args[0]})`;
  };
  const k2 = (o: OpArgs): string => {
    const op = o.node.opcode;
    if (!isBinaryName(op)) throw new Error(`no binary kernel for ${op}`);
    const f = ext.ref(binaryKernel(op, o.argType), `${op} kernel (${o.argType})`);
    return `${f}(${o.args[0]}, ${o.args[1]})`;
  };
  const float = (o: OpArgs) => elementInfo(o.argType).float;
  const atoms = (o: OpArgs) => o.atoms.every((x) => x);
  const mathF = (f: string) => (o: OpArgs) => round(o.argType, `Math.${f}(${o.args[0]})`);
  const addSub = (sym: "+" | "-") => (o: OpArgs) => {
    const [a, b] = o.args;
    const t = o.argType;
    if (float(o)) return round(t, `${a} ${sym} ${b}`);
    if (t === "s32") return `((${a} ${sym} ${b}) | 0)`;
    if (t === "u8") return `((${a} ${sym} ${b}) & 255)`;
    if (t === "pred") return `(${a} ${sym === "+" ? "|" : "^"} ${b})`;
    return k2(o);
  };
  const minMax = (o: OpArgs) => {
    // std::max / std::min: NaN propagates; otherwise ties (-0 vs +0) keep the lhs.
    if (!atoms(o)) return k2(o);
    const [a, b] = o.args;
    const pick =
      o.node.opcode === "maximum" ? `${a} < ${b} ? ${b} : ${a}` : `${b} < ${a} ? ${b} : ${a}`;
    if (float(o)) return `(${a} !== ${a} ? ${a} : ${b} !== ${b} ? ${b} : ${pick})`;
    return `(${pick})`;
  };
  return {
    ...baseOps,
    abs: (o) => {
      const a = o.args[0]!;
      if (float(o)) return `Math.abs(${a})`;
      if (o.argType === "s32") return atoms(o) ? `(${a} < 0 ? -(${a}) | 0 : ${a})` : k1(o);
      return o.argType === "s64" ? k1(o) : a;
    },
    negate: (o) => {
      const a = o.args[0]!;
      if (float(o)) return `(-(${a}))`;
      if (o.argType === "s32") return `(-(${a}) | 0)`;
      if (o.argType === "u8") return `(-(${a}) & 255)`;
      return o.argType === "s64" ? k1(o) : a;
    },
    sign: (o) => {
      const a = o.args[0]!;
      if (o.argType === "u8") return `(${a} > 0 ? 1 : 0)`;
      if (o.argType === "pred") return a;
      if (o.argType === "s64" || !atoms(o)) return k1(o);
      return `(${a} > 0 ? 1 : ${a} < 0 ? -1 : ${float(o) ? a : "0"})`;
    },
    exponential: mathF("exp"),
    "exponential-minus-one": mathF("expm1"),
    log: mathF("log"),
    "log-plus-one": mathF("log1p"),
    sqrt: mathF("sqrt"),
    rsqrt: (o) => round(o.argType, `1 / Math.sqrt(${o.args[0]})`),
    cbrt: mathF("cbrt"),
    tanh: mathF("tanh"),
    logistic: (o) => round(o.argType, `1 / (1 + Math.exp(-(${o.args[0]})))`),
    sine: mathF("sin"),
    cosine: mathF("cos"),
    tan: mathF("tan"),
    erf: (o) => round(o.argType, `${ext.ref(erf, "erf")}(${o.args[0]})`),
    floor: (o) => `Math.floor(${o.args[0]})`,
    ceil: (o) => `Math.ceil(${o.args[0]})`,
    "round-nearest-afz": k1,
    "round-nearest-even": k1,
    "is-finite": (o) => `(Number.isFinite(${o.args[0]}) ? 1 : 0)`,
    not: (o) => {
      const a = o.args[0]!;
      if (o.argType === "s32") return `(~(${a}))`;
      if (o.argType === "u8") return `(~(${a}) & 255)`;
      if (o.argType === "pred") return `(1 - (${a}))`;
      return k1(o);
    },
    convert: (o) => convertJs(ext, o.argType, o.type, o.args[0]!, round),
    add: addSub("+"),
    subtract: addSub("-"),
    multiply: (o) => {
      const [a, b] = o.args;
      const t = o.argType;
      if (float(o)) return round(t, `${a} * ${b}`);
      if (t === "s32") return `Math.imul(${a}, ${b})`;
      if (t === "u8") return `((${a} * ${b}) & 255)`;
      if (t === "pred") return `(${a} & ${b})`;
      return k2(o);
    },
    divide: (o) => (float(o) ? round(o.argType, `${o.args[0]} / ${o.args[1]}`) : k2(o)),
    remainder: (o) => (float(o) ? round(o.argType, `${o.args[0]} % ${o.args[1]}`) : k2(o)),
    power: (o) => {
      if (!float(o)) return k2(o);
      const f = ext.ref(binaryKernel("power", o.argType), `power kernel (${o.argType})`);
      return round(o.argType, `${f}(${o.args[0]}, ${o.args[1]})`);
    },
    maximum: minMax,
    minimum: minMax,
    atan2: (o) => round(o.argType, `Math.atan2(${o.args[0]}, ${o.args[1]})`),
    "shift-left": k2,
    "shift-right-arithmetic": k2,
    "shift-right-logical": k2,
    compare: (o) => {
      const dir = o.node.direction!;
      const ct = o.node.comparison;
      const [a, b] = o.args;
      if (float(o) && ct === "TOTALORDER") {
        const t = o.argType;
        const k = ext.ref(compareKernel(t, dir, ct), `compare ${dir} TOTALORDER (${t})`,
          `cmp:${t}:${dir}:TOTALORDER`);
        return `${k}(${a}, ${b})`;
      }
      const js = { EQ: "===", NE: "!==", LT: "<", LE: "<=", GT: ">", GE: ">=" }[dir];
      return `(${a} ${js} ${b} ? 1 : 0)`;
    },
    clamp: (o) => {
      const f = float(o) ? ext.ref(clampF, "clampF") : ext.ref(clampI, "clampI");
      return `${f}(${o.args[0]}, ${o.args[1]}, ${o.args[2]})`;
    },
  } satisfies OpTable;
}

/** convert: the evaluator's converter, inline where it is one JS operation. */
function convertJs(
  ext: ExtTable,
  from: ElementType,
  to: ElementType,
  x: string,
  round: (t: ElementType, code: string) => string,
): string {
  if (from === to) return x;
  const helper = () => {
    const f = ext.ref(converter(from, to), `convert ${from}->${to}`, `conv:${from}:${to}`);
    return `${f}(${x})`;
  };
  if (from === "s64") return helper();
  if (to === "pred") return `(${x} !== 0 ? 1 : 0)`;
  if (elementInfo(from).float) {
    if (to === "f32") return x;
    if (to === "f16" || to === "bf16") return round(to, x);
    return helper();
  }
  switch (to) {
    case "f32":
    case "f16":
    case "bf16":
      return round(to, x);
    case "s32":
      return `(${x} | 0)`;
    case "u8":
      return `(${x} & 255)`;
    case "s64":
      return `BigInt(${x})`;
    default:
      return helper();
  }
}

/** True when an index expression is known to be non-negative (loop variables start at 0). */
export function nonNegative(x: Ix): boolean {
  switch (x.op) {
    case "const":
      return x.v >= 0;
    case "var":
    case "size":
      return true;
    case "sum":
      return x.k >= 0 && x.terms.every((t) => t.coef > 0 && nonNegative(t.atom));
    case "prod":
      return x.factors.every(nonNegative);
    case "floordiv":
    case "mod":
      return nonNegative(x.a) && nonNegative(x.b);
    case "min":
      return nonNegative(x.a) && nonNegative(x.b);
    case "max":
      return nonNegative(x.a) || nonNegative(x.b);
    case "value":
      return false;
    default: {
      const never: never = x;
      throw new Error(`unknown index node ${String(never)}`);
    }
  }
}

/** Renders one scheduled kernel as a JS function named `name`. */
export class JsKernelRenderer {
  private readonly ops: OpTable;

  constructor(readonly ext: ExtTable) {
    this.ops = jsOps(ext);
  }

  render(sk: ScheduledKernel, name: string): string {
    const k = sk.kernel;
    const params = [
      ...k.bufs.map((_, i) => `b${i}`),
      ...Array.from({ length: k.sizes }, (_, i) => `s${i}`),
      ...(k.ranges >= 1 ? ["lo0", "hi0"] : []),
      ...(k.ranges >= 2 ? ["lo1", "hi1"] : []),
    ];
    const lines: string[] = [`// ${commentText(k.comment)}`, `function ${name}(${params.join(", ")}) {`];
    this.stmts(sk.body, "  ", lines);
    lines.push("}");
    return lines.join("\n");
  }

  private stmts(body: readonly SStmt[], ind: string, out: string[]): void {
    for (const s of body) {
      switch (s.s) {
        case "let":
          out.push(`${ind}const t${s.n} = ${this.expr(s.value)};`);
          break;
        case "loop": {
          const v = `i${s.v}`;
          const lo = s.range !== undefined ? `lo${s.range}` : this.expr(s.lo);
          const hi = s.range !== undefined ? `hi${s.range}` : this.expr(s.hi);
          out.push(`${ind}for (let ${v} = ${lo}; ${v} < ${hi}; ${v}++) {`);
          this.stmts(s.body, ind + "  ", out);
          out.push(`${ind}}`);
          break;
        }
        case "store":
          out.push(`${ind}b${s.buf}[${this.expr(s.index)}] = ${this.expr(s.value)};`);
          break;
        case "accInit":
          out.push(`${ind}let a${s.acc} = ${this.expr(s.value)};`);
          break;
        case "accSet": {
          if (s.accs.length === 1) {
            out.push(`${ind}a${s.accs[0]} = ${this.expr(s.values[0]!)};`);
            break;
          }
          // Simultaneous: every new value is computed before any accumulator changes.
          const tmp = s.accs.map((a, i) => `n${a}_${i}`);
          s.values.forEach((v, i) => out.push(`${ind}const ${tmp[i]} = ${this.expr(v)};`));
          s.accs.forEach((a, i) => out.push(`${ind}a${a} = ${tmp[i]};`));
          break;
        }
        case "if":
          out.push(`${ind}if (${s.when.map((c) => this.cmp(c)).join(" && ")}) {`);
          this.stmts(s.body, ind + "  ", out);
          out.push(`${ind}}`);
          break;
        default: {
          const never: never = s;
          throw new Error(`unknown statement ${String(never)}`);
        }
      }
    }
  }

  private cmp(c: SCmp): string {
    const rel = { lt: "<", le: "<=", eq: "===", ne: "!==" }[c.rel];
    return `${this.expr(c.a)} ${rel} ${this.expr(c.b)}`;
  }

  private isAtom(e: Expr): boolean {
    return e.e === "name" || (e.e === "node" && e.args.length === 0);
  }

  expr(e: Expr): string {
    switch (e.e) {
      case "name":
        return `t${e.n}`;
      case "lin": {
        let s = "";
        for (const t of e.terms) {
          const x = this.expr(t.x);
          const mag = Math.abs(t.coef);
          const term = mag === 1 ? x : `${x} * ${mag}`;
          if (s === "") s = t.coef < 0 ? `-${term}` : term;
          else s += t.coef < 0 ? ` - ${term}` : ` + ${term}`;
        }
        if (s === "") return String(e.k);
        if (e.k !== 0) s += e.k < 0 ? ` - ${-e.k}` : ` + ${e.k}`;
        return s.startsWith("-") ? `(0 ${s.replace(/^-/, "- ")})` : `(${s})`;
      }
      case "node":
        return this.node(e.node, e.args);
      default: {
        const never: never = e;
        throw new Error(`unknown expression ${String(never)}`);
      }
    }
  }

  private node(n: Node, args: readonly Expr[]): string {
    const a = (i: number) => this.expr(args[i]!);
    if (isIx(n)) {
      switch (n.op) {
        case "const":
          return String(n.v);
        case "var":
          return `i${n.id}`;
        case "size":
          return `s${n.id}`;
        case "prod":
          return `(${args.map((x) => this.expr(x)).join(" * ")})`;
        case "floordiv":
          return `Math.floor(${a(0)} / ${a(1)})`;
        case "mod":
          return nonNegative(n.a) ? `(${a(0)} % ${a(1)})` : `(((${a(0)} % ${a(1)}) + ${a(1)}) % ${a(1)})`;
        case "min":
          return `Math.min(${a(0)}, ${a(1)})`;
        case "max":
          return `Math.max(${a(0)}, ${a(1)})`;
        case "value":
          return n.s.type === "s64" ? `Number(${a(0)})` : a(0);
        case "sum":
          throw new Error("a sum reaches the renderer as a linear expression");
        default: {
          const never: never = n;
          throw new Error(`unknown index node ${String(never)}`);
        }
      }
    }
    switch (n.op) {
      case "const":
        return scalarCode(n.type, n.value);
      case "load":
        return `b${n.buf}[${a(0)}]`;
      case "index": {
        const i = a(0);
        switch (n.type) {
          case "s32":
            return `(${i})`;
          case "s64":
            return `BigInt(${i})`;
          case "pred":
            return `(${i} !== 0 ? 1 : 0)`;
          case "u8":
            return `(${i} & 255)`;
          case "f32":
            return `Math.fround(${i})`;
          case "f16":
            return `${this.ext.ref(roundToF16, "roundToF16")}(${i})`;
          case "bf16":
            return `${this.ext.ref(roundToBF16, "roundToBF16")}(${i})`;
          case "f64":
            return `(+${i})`;
          case "s4":
          case "s8":
          case "s16":
          case "u4":
          case "u16":
          case "u32":
          case "u64":
          case "f8e5m2":
          case "f8e4m3":
          case "f8e3m4":
          case "f8e4m3fn":
          case "f8e4m3fnuz":
          case "f8e5m2fnuz":
          case "f8e4m3b11fnuz":
          case "token":
            // Declined before rendering (runtime/kernel/program.ts): no kernel computes in these.
            throw new Error(`${n.type} has no kernel type`);
          default: {
            const never: never = n.type;
            throw new Error(`unknown element type ${String(never)}`);
          }
        }
      }
      case "acc":
        return `a${n.id}`;
      case "cond": {
        const m = n.when.length;
        const conds: string[] = [];
        for (let j = 0; j < m; j++) {
          const rel = { lt: "<", le: "<=", eq: "===", ne: "!==" }[n.when[j]!.rel];
          conds.push(`${a(2 * j)} ${rel} ${a(2 * j + 1)}`);
        }
        return `(${conds.join(" && ")} ? ${a(2 * m)} : ${a(2 * m + 1)})`;
      }
      case "apply": {
        const fn = this.ops[n.opcode];
        return fn({
          args: args.map((x) => this.expr(x)),
          atoms: args.map((x) => this.isAtom(x)),
          type: n.type,
          argType: n.argType,
          node: n,
        });
      }
      default: {
        const never: never = n;
        throw new Error(`unknown scalar node ${String(never)}`);
      }
    }
  }
}
