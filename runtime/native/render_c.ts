// The C renderer of kernel IR: a scheduled kernel (runtime/kernel/schedule.ts) as one C
// function over the ABI of csrc/kiln_rt.h — `void k(const KilnArgs* a, int64_t lo0, int64_t
// hi0)` for a kernel over a range, `(a, r0, r1, c0, c1)` for a tile kernel (a contraction's
// epilogue). Buffers are the Literals' storage (f16 and bf16 values live in floats, already
// rounded), indices int64. Elementwise ops render from the op table below (`satisfies OpTable`:
// a scalar opcode without an entry does not compile): integer corners through
// csrc/kiln_kernel.h's helpers (the evaluator's semantics exactly), transcendental functions
// through kiln_math.h's branch-free polynomials so gcc vectorizes the loops around them. Float
// results are C's IEEE arithmetic (contracted to FMA where the compiler likes): the tolerance
// tier. A reduction loop over one float accumulator with a known combiner is annotated
// `omp simd reduction`, the one place reassociation is allowed (built with -fopenmp-simd).

import { elementInfo } from "../../ir/element_types.ts";
import type { ElementType } from "../../ir/shape.ts";
import { children, isIx, type Ix, type Node, type ScalarOpcode } from "../kernel/kir.ts";
import { baseOps, COMPARE_SYMBOL, type OpArgs, type OpTable } from "../kernel/ops.ts";
import type { Expr, SCmp, ScheduledKernel, SStmt } from "../kernel/schedule.ts";

/** The C storage type of an element type. */
export function cType(t: ElementType): string {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
      return "float";
    case "f64":
      return "double";
    case "s32":
      return "int32_t";
    case "s64":
      return "int64_t";
    case "u8":
    case "pred":
      return "uint8_t";
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
      throw new Error(`${t} has no kernel type`);
    default: {
      const never: never = t;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

/** A float literal that C reads back as exactly this f32 value (or an integer literal). */
export function cLiteral(t: ElementType, v: number | bigint): string {
  if (t === "s64") {
    const b = BigInt(v);
    return b === -(2n ** 63n) ? "INT64_MIN" : `INT64_C(${b})`;
  }
  const n = Number(v);
  if (!elementInfo(t).float) {
    if (t === "s32" && n === -2147483648) return "INT32_MIN";
    return String(n);
  }
  if (Number.isNaN(n)) return "NAN";
  if (n === Infinity) return "INFINITY";
  if (n === -Infinity) return "(-INFINITY)";
  if (Object.is(n, -0)) return "(-0.0f)";
  // Every f32 is exactly a double; print it as a double and let C round it once.
  return `((float)${n.toPrecision(17)})`;
}

type Round = (t: ElementType, code: string) => string;

const round: Round = (t, code) => {
  if (t === "f16") return `kiln_rf16(${code})`;
  if (t === "bf16") return `kiln_rbf16(${code})`;
  return code;
};

const F = (t: ElementType) => elementInfo(t).float;

function intOp(
  name: string,
  forType: Partial<Record<ElementType, (a: readonly string[]) => string>>,
): (o: OpArgs) => string {
  return (o) => {
    const f = forType[o.argType];
    if (!f) throw new Error(`${name} is not defined for ${o.argType}`);
    return f(o.args);
  };
}

const call = (fn: string) => (a: readonly string[]) => `${fn}(${a.join(", ")})`;

/** One float math function: f32 inline, f16/bf16 rounded to their type. */
const fmath = (fn: string): ((o: OpArgs) => string) => (o) =>
  round(o.argType, `${fn}(${o.args.join(", ")})`);

/** The C op table. */
export const cOps = {
  ...baseOps,
  abs: (o) =>
    F(o.argType)
      ? `fabsf(${o.args[0]})`
      : intOp("abs", {
          s32: call("kiln_abs_s32"),
          s64: call("kiln_abs_s64"),
          u8: (a) => a[0]!,
          pred: (a) => a[0]!,
        })(o),
  negate: (o) =>
    F(o.argType)
      ? `(-(${o.args[0]}))`
      : intOp("negate", {
          s32: call("kiln_neg_s32"),
          s64: call("kiln_neg_s64"),
          u8: (a) => `((uint8_t)(0u - (unsigned)${a[0]}))`,
          pred: (a) => a[0]!,
        })(o),
  sign: (o) =>
    F(o.argType)
      ? `kiln_fsign(${o.args[0]})`
      : intOp("sign", {
          s32: call("kiln_sign_s32"),
          s64: call("kiln_sign_s64"),
          u8: (a) => `((uint8_t)(${a[0]} > 0))`,
          pred: (a) => a[0]!,
        })(o),
  exponential: fmath("kiln_expf"),
  "exponential-minus-one": fmath("kiln_expm1f"),
  log: fmath("kiln_logf"),
  "log-plus-one": fmath("kiln_log1pf"),
  sqrt: fmath("sqrtf"),
  rsqrt: (o) => round(o.argType, `(1.0f / sqrtf(${o.args[0]}))`),
  cbrt: fmath("cbrtf"),
  tanh: fmath("kiln_tanhf"),
  logistic: fmath("kiln_logisticf"),
  sine: fmath("sinf"),
  cosine: fmath("cosf"),
  tan: fmath("tanf"),
  erf: fmath("kiln_erff"),
  floor: (o) => `floorf(${o.args[0]})`,
  ceil: (o) => `ceilf(${o.args[0]})`,
  "round-nearest-afz": (o) => `kiln_round_afz(${o.args[0]})`,
  "round-nearest-even": (o) => `kiln_round_even(${o.args[0]})`,
  "is-finite": (o) => `kiln_isfinite(${o.args[0]})`,
  not: intOp("not", {
    s32: (a) => `(~${a[0]})`,
    s64: (a) => `(~${a[0]})`,
    u8: (a) => `((uint8_t)~${a[0]})`,
    pred: (a) => `((uint8_t)(1 - ${a[0]}))`,
  }),
  convert: (o) => convertC(o.argType, o.type, o.args[0]!),
  add: (o) =>
    F(o.argType)
      ? round(o.argType, `(${o.args[0]} + ${o.args[1]})`)
      : intOp("add", {
          s32: call("kiln_add_s32"),
          s64: call("kiln_add_s64"),
          u8: (a) => `((uint8_t)(${a[0]} + ${a[1]}))`,
          pred: (a) => `((uint8_t)(${a[0]} | ${a[1]}))`,
        })(o),
  subtract: (o) =>
    F(o.argType)
      ? round(o.argType, `(${o.args[0]} - ${o.args[1]})`)
      : intOp("subtract", {
          s32: call("kiln_sub_s32"),
          s64: call("kiln_sub_s64"),
          u8: (a) => `((uint8_t)(${a[0]} - ${a[1]}))`,
          pred: (a) => `((uint8_t)(${a[0]} ^ ${a[1]}))`,
        })(o),
  multiply: (o) =>
    F(o.argType)
      ? round(o.argType, `(${o.args[0]} * ${o.args[1]})`)
      : intOp("multiply", {
          s32: call("kiln_mul_s32"),
          s64: call("kiln_mul_s64"),
          u8: (a) => `((uint8_t)((unsigned)${a[0]} * (unsigned)${a[1]}))`,
          pred: (a) => `((uint8_t)(${a[0]} & ${a[1]}))`,
        })(o),
  divide: (o) =>
    F(o.argType)
      ? round(o.argType, `(${o.args[0]} / ${o.args[1]})`)
      : intOp("divide", {
          s32: call("kiln_div_s32"),
          s64: call("kiln_div_s64"),
          u8: call("kiln_div_u8"),
          pred: call("kiln_div_pred"),
        })(o),
  remainder: (o) =>
    F(o.argType)
      ? round(o.argType, `fmodf(${o.args[0]}, ${o.args[1]})`)
      : intOp("remainder", {
          s32: call("kiln_rem_s32"),
          s64: call("kiln_rem_s64"),
          u8: call("kiln_rem_u8"),
          pred: call("kiln_rem_pred"),
        })(o),
  power: (o) =>
    F(o.argType)
      ? round(o.argType, `kiln_powf(${o.args[0]}, ${o.args[1]})`)
      : intOp("power", {
          s32: call("kiln_pow_s32"),
          s64: call("kiln_pow_s64"),
          u8: call("kiln_pow_u8"),
          pred: call("kiln_pow_pred"),
        })(o),
  maximum: (o) =>
    F(o.argType)
      ? `kiln_fmax(${o.args[0]}, ${o.args[1]})`
      : `(${o.args[0]} < ${o.args[1]} ? ${o.args[1]} : ${o.args[0]})`,
  minimum: (o) =>
    F(o.argType)
      ? `kiln_fmin(${o.args[0]}, ${o.args[1]})`
      : `(${o.args[1]} < ${o.args[0]} ? ${o.args[1]} : ${o.args[0]})`,
  atan2: fmath("atan2f"),
  "shift-left": intOp("shift-left", {
    s32: call("kiln_shl_s32"),
    s64: call("kiln_shl_s64"),
    u8: call("kiln_shl_u8"),
  }),
  "shift-right-arithmetic": intOp("shift-right-arithmetic", {
    s32: call("kiln_sra_s32"),
    s64: call("kiln_sra_s64"),
    u8: call("kiln_sra_u8"),
  }),
  "shift-right-logical": intOp("shift-right-logical", {
    s32: call("kiln_srl_s32"),
    s64: call("kiln_srl_s64"),
    u8: call("kiln_srl_u8"),
  }),
  compare: (o) => {
    const dir = o.node.direction!;
    const [a, b] = o.args;
    const sym = COMPARE_SYMBOL[dir];
    if (F(o.argType) && o.node.comparison === "TOTALORDER") {
      return `((uint8_t)(kiln_total_key(${a}) ${sym} kiln_total_key(${b})))`;
    }
    return `((uint8_t)(${a} ${sym} ${b}))`;
  },
  clamp: (o) => {
    const [l, x, h] = o.args;
    if (F(o.argType)) return `kiln_fclamp(${l}, ${x}, ${h})`;
    const m = `(${x} < ${l} ? ${l} : ${x})`;
    return `(${m} < ${h} ? ${m} : ${h})`;
  },
} satisfies OpTable;

/** convert, as the evaluator's converter. */
function convertC(from: ElementType, to: ElementType, x: string): string {
  if (from === to) return x;
  if (to === "pred") return `((uint8_t)(${x} != 0))`;
  const ff = F(from);
  if (ff) {
    switch (to) {
      case "f32":
        return x;
      case "f16":
        return `kiln_rf16(${x})`;
      case "bf16":
        return `kiln_rbf16(${x})`;
      case "s32":
        return `kiln_f2s32(${x})`;
      case "u8":
        return `kiln_f2u8(${x})`;
      case "s64":
        return `kiln_f2s64(${x})`;
      default:
        throw new Error(`cannot convert ${from} to ${to}`);
    }
  }
  switch (to) {
    case "f32":
      return `((float)${x})`;
    case "f16":
      return `kiln_rf16((float)${x})`;
    case "bf16":
      return `kiln_rbf16((float)${x})`;
    case "s32":
      return `((int32_t)(uint32_t)(uint64_t)${x})`;
    case "u8":
      return `((uint8_t)${x})`;
    case "s64":
      return `((int64_t)${x})`;
    default:
      throw new Error(`cannot convert ${from} to ${to}`);
  }
}

/** True when an index expression is known to be non-negative (loop variables start at 0). */
function nonNegative(x: Ix): boolean {
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

const REL = { lt: "<", le: "<=", eq: "==", ne: "!=" } as const;

/** Renders scheduled kernels as C functions. */
export class CKernelRenderer {
  /**
   * The C function of a kernel, named `name`; no comment (the text is the kernel's identity:
   * the same kernel at another shape of a generic op must render the same).
   */
  render(sk: ScheduledKernel, name: string): string {
    const k = sk.kernel;
    const params =
      k.ranges === 2
        ? "const KilnArgs* a, int64_t lo0, int64_t hi0, int64_t lo1, int64_t hi1"
        : "const KilnArgs* a, int64_t lo0, int64_t hi0";
    const out: string[] = [`static void ${name}(${params}) {`];
    k.bufs.forEach((b, i) => {
      const t = cType(b.type);
      const q = b.access === "r" ? "const " : "";
      out.push(`  ${q}${t}* b${i} = (${q}${t}*)a->buf[${i}];`);
    });
    for (let i = 0; i < k.sizes; i++) out.push(`  const int64_t s${i} = a->size[${i}];`);
    if (k.ranges === 0) out.push(`  (void)lo0; (void)hi0;`);
    const types = new Map<number, ElementType>();
    this.collectAccTypes(sk.body, types);
    this.stmts(sk.body, "  ", out, types);
    out.push("}");
    return out.join("\n");
  }

  private collectAccTypes(body: readonly SStmt[], types: Map<number, ElementType>): void {
    for (const s of body) {
      if (s.s === "accInit") types.set(s.acc, s.type);
      if (s.s === "loop" || s.s === "if") this.collectAccTypes(s.body, types);
    }
  }

  private stmts(
    body: readonly SStmt[],
    ind: string,
    out: string[],
    accTypes: Map<number, ElementType>,
  ): void {
    for (const s of body) {
      switch (s.s) {
        case "let":
          out.push(
            `${ind}const ${s.type === "index" ? "int64_t" : cType(s.type)} t${s.n} = ` +
              `${this.expr(s.value)};`,
          );
          break;
        case "loop": {
          const v = `i${s.v}`;
          const lo = s.range !== undefined ? `lo${s.range}` : this.expr(s.lo);
          const hi = s.range !== undefined ? `hi${s.range}` : this.expr(s.hi);
          const lanes = this.laneReduction(s, accTypes);
          if (lanes !== undefined) {
            this.laneSplit(s, lanes, lo, hi, ind, out, accTypes);
            break;
          }
          const simd = this.simdReduction(s, accTypes);
          if (simd) out.push(`${ind}${simd}`);
          out.push(`${ind}for (int64_t ${v} = ${lo}; ${v} < ${hi}; ${v}++) {`);
          this.stmts(s.body, ind + "  ", out, accTypes);
          out.push(`${ind}}`);
          break;
        }
        case "store":
          out.push(`${ind}b${s.buf}[${this.expr(s.index)}] = ${this.expr(s.value)};`);
          break;
        case "accInit":
          out.push(`${ind}${cType(s.type)} a${s.acc} = ${this.expr(s.value)};`);
          break;
        case "accSet": {
          if (s.accs.length === 1) {
            out.push(`${ind}a${s.accs[0]} = ${this.expr(s.values[0]!)};`);
            break;
          }
          const tmp = s.accs.map((a, i) => `n${a}_${i}`);
          s.values.forEach((v, i) => {
            const t = accTypes.get(s.accs[i]!)!;
            out.push(`${ind}const ${cType(t)} ${tmp[i]} = ${this.expr(v)};`);
          });
          s.accs.forEach((a, i) => out.push(`${ind}a${a} = ${tmp[i]};`));
          break;
        }
        case "if":
          out.push(`${ind}if (${s.when.map((c) => this.cmp(c)).join(" && ")}) {`);
          this.stmts(s.body, ind + "  ", out, accTypes);
          out.push(`${ind}}`);
          break;
        default: {
          const never: never = s;
          throw new Error(`unknown statement ${String(never)}`);
        }
      }
    }
  }

  /**
   * `#pragma omp simd reduction(+:a3)` for a reduction loop whose body updates one float
   * accumulator by addition (the tolerance tier's reassociation) and has no inner loops.
   */
  private simdReduction(
    s: Extract<SStmt, { s: "loop" }>,
    accTypes: Map<number, ElementType>,
  ): string | undefined {
    if (s.tag !== "reduce") return undefined;
    if (s.body.some((b) => b.s === "loop" || b.s === "if" || b.s === "store")) return undefined;
    const sets = s.body.filter((b): b is Extract<SStmt, { s: "accSet" }> => b.s === "accSet");
    if (sets.length !== 1) return undefined;
    const set = sets[0]!;
    if (set.accs.length !== 1 || set.combiner !== "add") return undefined;
    const t = accTypes.get(set.accs[0]!);
    if (t !== "f32") return undefined;
    return `#pragma omp simd reduction(+:a${set.accs[0]})`;
  }

  /**
   * A float maximum/minimum reduction loop (no inner loops, ifs or stores, one accumulator):
   * its accumulator, to be split over LANES independent lanes. Unlike a sum, these folds give
   * the same value in any order (NaN propagates from anywhere; only a tie of -0 and +0 may pick
   * the other zero), so splitting them is exact but for that sign; gcc cannot vectorize the
   * NaN-propagating chain itself.
   */
  private laneReduction(
    s: Extract<SStmt, { s: "loop" }>,
    accTypes: Map<number, ElementType>,
  ): number | undefined {
    if (s.tag !== "reduce" || s.range !== undefined) return undefined;
    if (s.body.some((b) => b.s === "loop" || b.s === "if" || b.s === "store" || b.s === "accInit")) {
      return undefined;
    }
    const sets = s.body.filter((b): b is Extract<SStmt, { s: "accSet" }> => b.s === "accSet");
    if (sets.length !== 1 || sets[0]!.accs.length !== 1) return undefined;
    const c = sets[0]!.combiner;
    if (c !== "maximum" && c !== "minimum") return undefined;
    const t = accTypes.get(sets[0]!.accs[0]!);
    return t === "f32" || t === "f16" || t === "bf16" ? sets[0]!.accs[0]! : undefined;
  }

  /** Renders a lane-split reduction loop (see laneReduction). */
  private laneSplit(
    s: Extract<SStmt, { s: "loop" }>,
    acc: number,
    lo: string,
    hi: string,
    ind: string,
    out: string[],
    accTypes: Map<number, ElementType>,
  ): void {
    const LANES = 16;
    const set = s.body.find((b) => b.s === "accSet") as Extract<SStmt, { s: "accSet" }>;
    const fn = set.combiner === "maximum" ? "kiln_fmax" : "kiln_fmin";
    const a = `a${acc}`;
    const v = `i${s.v}`;
    const L = `L${acc}`;
    const i2 = ind + "  ";
    out.push(`${ind}{`);
    out.push(`${i2}float ${L}[${LANES}];`);
    out.push(`${i2}for (int64_t l = 0; l < ${LANES}; l++) ${L}[l] = ${a};`);
    out.push(`${i2}int64_t ${v}_b = ${lo};`);
    out.push(`${i2}const int64_t ${v}_e = ${hi};`);
    out.push(`${i2}for (; ${v}_b + ${LANES} <= ${v}_e; ${v}_b += ${LANES}) {`);
    out.push(`${i2}  for (int64_t l = 0; l < ${LANES}; l++) {`);
    out.push(`${i2}    const int64_t ${v} = ${v}_b + l;`);
    out.push(`${i2}    float ${a} = ${L}[l];`);
    this.stmts(s.body, i2 + "    ", out, accTypes);
    out.push(`${i2}    ${L}[l] = ${a};`);
    out.push(`${i2}  }`);
    out.push(`${i2}}`);
    out.push(`${i2}for (int64_t ${v} = ${v}_b; ${v} < ${v}_e; ${v}++) {`);
    this.stmts(s.body, i2 + "  ", out, accTypes);
    out.push(`${i2}}`);
    out.push(`${i2}for (int64_t l = 0; l < ${LANES}; l++) ${a} = ${fn}(${a}, ${L}[l]);`);
    out.push(`${ind}}`);
  }

  private cmp(c: SCmp): string {
    return `${this.expr(c.a)} ${REL[c.rel]} ${this.expr(c.b)}`;
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
          const term = mag === 1 ? x : `${x} * INT64_C(${mag})`;
          if (s === "") s = t.coef < 0 ? `-${term}` : term;
          else s += t.coef < 0 ? ` - ${term}` : ` + ${term}`;
        }
        if (s === "") return `INT64_C(${e.k})`;
        if (e.k !== 0) s += e.k < 0 ? ` - INT64_C(${-e.k})` : ` + INT64_C(${e.k})`;
        return `(${s})`;
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
          return `INT64_C(${n.v})`;
        case "var":
          return `i${n.id}`;
        case "size":
          return `s${n.id}`;
        case "prod":
          return `(${args.map((x) => this.expr(x)).join(" * ")})`;
        case "floordiv":
          return nonNegative(n.a) && nonNegative(n.b)
            ? `(${a(0)} / ${a(1)})`
            : `kiln_floordiv(${a(0)}, ${a(1)})`;
        case "mod":
          return nonNegative(n.a) && nonNegative(n.b)
            ? `(${a(0)} % ${a(1)})`
            : `kiln_floormod(${a(0)}, ${a(1)})`;
        case "min":
          return `kiln_imin(${a(0)}, ${a(1)})`;
        case "max":
          return `kiln_imax(${a(0)}, ${a(1)})`;
        case "value":
          return `((int64_t)${a(0)})`;
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
        return cLiteral(n.type, n.value);
      case "load":
        return `b${n.buf}[${a(0)}]`;
      case "index":
        return indexValue(n.type, a(0));
      case "acc":
        return `a${n.id}`;
      case "cond": {
        const m = n.when.length;
        const conds: string[] = [];
        for (let j = 0; j < m; j++) conds.push(`${a(2 * j)} ${REL[n.when[j]!.rel]} ${a(2 * j + 1)}`);
        return `(${conds.join(" && ")} ? ${a(2 * m)} : ${a(2 * m + 1)})`;
      }
      case "apply": {
        const fn = cOps[n.opcode as ScalarOpcode];
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

/** An integer index as a value of type t (iota: the evaluator's conversion from s64). */
function indexValue(t: ElementType, i: string): string {
  switch (t) {
    case "s32":
      return `((int32_t)${i})`;
    case "s64":
      return i;
    case "pred":
      return `((uint8_t)(${i} != 0))`;
    case "u8":
      return `((uint8_t)${i})`;
    case "f32":
      return `((float)${i})`;
    case "f16":
      return `kiln_rf16((float)${i})`;
    case "bf16":
      return `kiln_rbf16((float)${i})`;
    case "f64":
      return `((double)${i})`;
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
      throw new Error(`${t} has no kernel type`);
    default: {
      const never: never = t;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

function comment(s: string): string {
  return s.replace(/\*\//g, "* /").replace(/[\n\r\u2028\u2029]/g, " ");
}

/** A translation unit of kernels: one C source exporting them as a KilnLibrary. */
export function renderLibrary(
  fns: readonly { name: string; source: string; comment?: string }[],
): string {
  return [
    `/* Kiln native kernels (generated) */`,
    `#include "kiln_kernel.h"`,
    "",
    ...fns.flatMap((f) => [...(f.comment ? [`/* ${comment(f.comment)} */`] : []), f.source, ""]),
    `static const char* const kiln_names[] = {${fns.map((f) => `"${f.name}"`).join(", ")}};`,
    `static const void* const kiln_fns[] = {${fns.map((f) => `(const void*)${f.name}`).join(", ")}};`,
    `static void kiln_init(const KilnApi* api) { (void)api; }`,
    `KILN_EXPORT const KilnLibrary kiln_library_v1 = {`,
    `  KILN_ABI_VERSION, ${fns.length}, kiln_names, kiln_fns, kiln_init};`,
    "",
  ].join("\n");
}

/**
 * A sort as a range kernel over the rows it sorts (every position but the sorted dim):
 * buffers are the outputs then the inputs. Each row is the evaluator's top-down stable merge
 * sort with the same split and merge rule, so even a comparator that is not a strict weak
 * order gives the same permutation. The comparator is the step's scalar expression over
 * accumulators 0..2n-1 (lhs and rhs of each operand).
 */
export function renderSortKernel(
  step: {
    readonly dims: readonly number[];
    readonly dim: number;
    readonly comparator: { readonly args: readonly ElementType[]; readonly less: Node };
    readonly name: string;
  },
  name: string,
): string {
  const n = step.comparator.args.length / 2;
  const dims = step.dims;
  const d = step.dim;
  const len = dims[d]!;
  let stride = 1;
  for (let k = dims.length - 1; k > d; k--) stride *= dims[k]!;
  const r = new CKernelRenderer();
  const less = r.expr(inlineExpr(step.comparator.less));
  const lines = [`static void ${name}(const KilnArgs* a, int64_t lo0, int64_t hi0) {`];
  for (let i = 0; i < n; i++) {
    const t = cType(step.comparator.args[2 * i]!);
    lines.push(`  ${t}* out${i} = (${t}*)a->buf[${i}];`);
    lines.push(`  const ${t}* in${i} = (const ${t}*)a->buf[${n + i}];`);
  }
  lines.push(`  int32_t* perm = (int32_t*)malloc(sizeof(int32_t) * ${Math.max(1, len)} * 2);`);
  lines.push(`  if (perm == NULL) return;`);
  lines.push(`  int32_t* tmp = perm + ${len};`);
  lines.push(`  for (int64_t o = lo0; o < hi0; o++) {`);
  lines.push(`    const int64_t base = (o % ${stride}) + (o / ${stride}) * ${stride * len};`);
  lines.push(`    for (int32_t p = 0; p < ${len}; p++) perm[p] = p;`);
  lines.push(`    /* bottom-up over the same splits as the top-down merge sort */`);
  lines.push(`    int64_t stack[128][3]; int sp = 0;`);
  lines.push(`    stack[sp][0] = 0; stack[sp][1] = ${len}; stack[sp][2] = 0; sp++;`);
  lines.push(`    while (sp > 0) {`);
  lines.push(`      int64_t lo = stack[sp - 1][0], hi = stack[sp - 1][1], st = stack[sp - 1][2];`);
  lines.push(`      if (hi - lo < 2) { sp--; continue; }`);
  lines.push(`      int64_t mid = lo + ((hi - lo) >> 1);`);
  lines.push(`      if (st == 0) { stack[sp - 1][2] = 1; stack[sp][0] = lo; stack[sp][1] = mid;`);
  lines.push(`        stack[sp][2] = 0; sp++; continue; }`);
  lines.push(`      if (st == 1) { stack[sp - 1][2] = 2; stack[sp][0] = mid; stack[sp][1] = hi;`);
  lines.push(`        stack[sp][2] = 0; sp++; continue; }`);
  lines.push(`      sp--;`);
  lines.push(`      for (int64_t t = lo; t < hi; t++) tmp[t] = perm[t];`);
  lines.push(`      int64_t i = lo, j = mid, w = lo;`);
  lines.push(`      while (i < mid && j < hi) {`);
  lines.push(`        const int64_t x = tmp[j], y = tmp[i];`);
  for (let k = 0; k < n; k++) {
    const t = cType(step.comparator.args[2 * k]!);
    lines.push(`        const ${t} a${2 * k} = in${k}[base + x * ${stride}];`);
    lines.push(`        const ${t} a${2 * k + 1} = in${k}[base + y * ${stride}];`);
  }
  lines.push(`        if (${less}) perm[w++] = tmp[j++]; else perm[w++] = tmp[i++];`);
  lines.push(`      }`);
  lines.push(`      while (i < mid) perm[w++] = tmp[i++];`);
  lines.push(`      while (j < hi) perm[w++] = tmp[j++];`);
  lines.push(`    }`);
  lines.push(`    for (int64_t p = 0; p < ${len}; p++) {`);
  for (let k = 0; k < n; k++) {
    lines.push(`      out${k}[base + p * ${stride}] = in${k}[base + perm[p] * ${stride}];`);
  }
  lines.push(`    }`);
  lines.push(`  }`);
  lines.push(`  free(perm);`);
  lines.push(`}`);
  return lines.join("\n");
}

/** A node as an expression tree with nothing bound. */
function inlineExpr(n: Node): Expr {
  if (isIx(n) && n.op === "sum") {
    return { e: "lin", k: n.k, terms: n.terms.map((t) => ({ x: inlineExpr(t.atom), coef: t.coef })) };
  }
  return { e: "node", node: n, args: children(n).map(inlineExpr) };
}
