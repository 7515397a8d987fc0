// Linear algebra ops, each lowered to the IR's general dot (batch and contracting dims): bmm,
// linear (weight [out, in] as PyTorch), outer, baddbmm and einsum. matmul itself lives in
// core.ts. einsum handles explicit and implicit output, ellipsis, repeated subscripts
// (diagonals), size-1 broadcasting and any number of operands: it takes diagonals with a
// strided slice, sums subscripts that occur in one operand only (torch.sum's dtype rule, so
// integer sums are int64 as in PyTorch), then contracts the operands left to right, each pair
// with one dot whose batch dims are the subscripts still needed later.

import type { ComputationBuilder } from "../../ir/builder.ts";
import type { Instruction } from "../../ir/module.ts";
import { p, problem } from "../args.ts";
import {
  DEFAULT_INT,
  type DType,
  isFloatingDType,
  isIntScalar,
  promoteTypes,
  type Scalar,
} from "../dtype.ts";
import {
  defineOp,
  installMethods,
  type MethodOf,
  type OpDefinition,
} from "../dispatch.ts";
import {
  broadcastTo,
  cast,
  computeType,
  dimsOf,
  dtypeOf,
  elementwise,
  fail,
  filledLike,
  opName,
  rankOf,
  reduce,
} from "../lower.ts";
import { broadcastShapes, shapeString } from "../shape.ts";
import { Tensor } from "../tensor.ts";

// ---- Shared checks --------------------------------------------------------------------------

/** PyTorch's matrix products need one dtype for all operands and refuse bool. */
function sameDType(b: ComputationBuilder, xs: readonly Instruction[], names: readonly string[]) {
  const t = dtypeOf(xs[0]!);
  xs.forEach((x, i) => {
    if (dtypeOf(x) !== t) {
      fail(b, `expected ${names[0]} and ${names[i]} to have the same dtype, got ${t} and ` +
        `${dtypeOf(x)}`);
    }
  });
  if (t === "bool") fail(b, `bool tensors are not supported`);
  return t;
}

function shapesOf(xs: readonly Instruction[]): string {
  return xs.map((x) => shapeString(dimsOf(x))).join(", ");
}

function isOne(v: Scalar): boolean {
  return v === 1 || v === 1n || v === true;
}

function isZero(v: Scalar): boolean {
  return v === 0 || v === 0n || v === false;
}

/** alpha/beta scale factors: integral results refuse fractional factors (PyTorch's rule). */
function checkFactor(b: ComputationBuilder, name: string, v: Scalar, t: DType): void {
  if (typeof v === "boolean") fail(b, `argument '${name}' must be a number, got ${v}`);
  if (!isFloatingDType(t) && typeof v === "number" && !isIntScalar(v)) {
    fail(b, `for integral inputs, argument '${name}' must not be a floating point number, ` +
      `got ${v}`);
  }
}

// ---- bmm, linear, outer, baddbmm -------------------------------------------------------------

/** [b, n, k] x [b, k, m] -> [b, n, m] after the shape checks bmm and baddbmm share. */
function batchedProduct(
  b: ComputationBuilder,
  x: Instruction,
  y: Instruction,
  names: readonly [string, string],
): Instruction {
  const a = dimsOf(x);
  const c = dimsOf(y);
  const [n1, n2] = names;
  if (a.length !== 3 || c.length !== 3) {
    fail(b, `${n1} and ${n2} must be 3-D tensors, got shapes ${shapesOf([x, y])}`);
  }
  if (a[0] !== c[0] || a[2] !== c[1]) {
    fail(b, `shapes ${shapesOf([x, y])} cannot be multiplied: expected ${n2} to have shape ` +
      `[${a[0]},${a[2]},*]`);
  }
  return b.dot(x, y, { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2], rhsContracting: [1] });
}

export const bmm = defineOp({
  name: "bmm",
  signature: [p.tensor("input"), p.tensor("mat2")],
  lower(b, [x, y]) {
    sameDType(b, [x!, y!], ["input", "mat2"]);
    return batchedProduct(b, x!, y!, ["input", "mat2"]);
  },
});

export const linear = defineOp({
  name: "linear",
  signature: [p.tensor("input"), p.tensor("weight"), p.tensor("bias").optional()],
  lower(b, [x, w, bias]) {
    const xs = bias ? [x!, w!, bias] : [x!, w!];
    sameDType(b, xs, ["input", "weight", "bias"]);
    const xd = dimsOf(x!);
    const wd = dimsOf(w!);
    if (xd.length === 0) fail(b, `input must have at least 1 dim, got shape []`);
    if (wd.length !== 1 && wd.length !== 2) {
      fail(b, `weight must be 1-D or 2-D ([out_features, in_features]), got ${shapeString(wd)}`);
    }
    const inX = xd[xd.length - 1]!;
    const inW = wd[wd.length - 1]!;
    if (inX !== inW) {
      fail(b, `input ${shapeString(xd)} has ${inX} features but weight ${shapeString(wd)} ` +
        `expects ${inW}`);
    }
    const y = b.dot(x!, w!, { lhsContracting: [xd.length - 1], rhsContracting: [wd.length - 1] });
    if (!bias) return y;
    const shape = broadcastShapes(opName(b), dimsOf(y), dimsOf(bias));
    return b.add(broadcastTo(b, y, shape), broadcastTo(b, bias, shape));
  },
});

export const outer = defineOp({
  name: "outer",
  signature: [p.tensor("input"), p.tensor("vec2")],
  lower(b, [x, y]) {
    if (rankOf(x!) !== 1 || rankOf(y!) !== 1) {
      fail(b, `both arguments must be 1-D, got shapes ${shapesOf([x!, y!])}`);
    }
    const n = dimsOf(x!)[0]!;
    const m = dimsOf(y!)[0]!;
    const { dtype, operands } = elementwise(b, [b.reshape(x!, [n, 1]), y!]);
    const [u, v] = operands;
    return dtype === "bool" ? b.and(u!, v!) : b.multiply(u!, v!);
  },
});

export const baddbmm = defineOp({
  name: "baddbmm",
  signature: [
    p.tensor("input"),
    p.tensor("batch1"),
    p.tensor("batch2"),
    p.scalar("beta").default(1),
    p.scalar("alpha").default(1),
  ],
  lower(b, [x, b1, b2], { beta, alpha }) {
    const t = sameDType(b, [x!, b1!, b2!], ["input", "batch1", "batch2"]);
    checkFactor(b, "beta", beta, t);
    checkFactor(b, "alpha", alpha, t);
    const ct = computeType(t);
    const prod = batchedProduct(b, cast(b, b1!, ct), cast(b, b2!, ct), ["batch1", "batch2"]);
    const shape = dimsOf(prod);
    // The input must expand to the product's shape (it cannot grow it).
    const xd = dimsOf(x!);
    const off = shape.length - xd.length;
    if (off < 0 || xd.some((d, i) => d !== 1 && d !== shape[off + i])) {
      fail(b, `input ${shapeString(dimsOf(x!))} cannot be broadcast to the product's shape ` +
        `${shapeString(shape)}`);
    }
    const scaled = isOne(alpha) ? prod : b.multiply(prod, filledLike(b, prod, alpha));
    // beta = 0 ignores the input entirely: its NaN and inf do not propagate (PyTorch).
    if (isZero(beta)) return cast(b, scaled, t);
    let inp = broadcastTo(b, cast(b, x!, ct), shape);
    if (!isOne(beta)) inp = b.multiply(inp, filledLike(b, inp, beta));
    return cast(b, b.add(inp, scaled), t);
  },
});

// ---- einsum ---------------------------------------------------------------------------------

/** Subscript labels are letters' char codes; ellipsis dims get labels from ELLIPSIS up. */
const ELLIPSIS = 1000;

function labelName(l: number): string {
  return l >= ELLIPSIS ? `...(${l - ELLIPSIS})` : String.fromCharCode(l);
}

interface ParsedEquation {
  inputs: number[][];
  output: number[];
}

/** Splits one term into letters' labels and the position of "..." (or -1). */
function scanTerm(b: ComputationBuilder, term: string, what: string) {
  const letters: number[] = [];
  let ellipsisAt = -1;
  for (let i = 0; i < term.length; i++) {
    const ch = term[i]!;
    if (ch === ".") {
      if (term.slice(i, i + 3) !== "..." || ellipsisAt >= 0) {
        fail(b, `${what} may contain one ellipsis ("...") and no other dots: '${term}'`);
      }
      ellipsisAt = letters.length;
      i += 2;
    } else if (/^[a-zA-Z]$/.test(ch)) {
      letters.push(ch.charCodeAt(0));
    } else {
      fail(b, `invalid subscript '${ch}' in ${what}: subscripts must be letters a-z, A-Z`);
    }
  }
  return { letters, ellipsisAt };
}

function parseEquation(
  b: ComputationBuilder,
  equation: string,
  ranks: readonly number[],
): ParsedEquation {
  const eq = equation.replace(/\s+/g, "");
  const arrow = eq.indexOf("->");
  if (arrow >= 0 && eq.indexOf("->", arrow + 1) >= 0) fail(b, `'->' may appear only once`);
  const lhs = arrow >= 0 ? eq.slice(0, arrow) : eq;
  const terms = lhs.split(",");
  if (terms.length !== ranks.length) {
    fail(b, `the equation '${equation}' has ${terms.length} operand term` +
      `${terms.length === 1 ? "" : "s"} but ${ranks.length} operand` +
      `${ranks.length === 1 ? " was" : "s were"} given`);
  }
  const scanned = terms.map((t, i) => scanTerm(b, t, `the term of operand ${i}`));
  const ellipsisRanks = scanned.map(({ letters, ellipsisAt }, i) => {
    const extra = ranks[i]! - letters.length;
    if (ellipsisAt < 0 ? extra !== 0 : extra < 0) {
      fail(b, `operand ${i} has ${ranks[i]} dims but its term '${terms[i]}' has ` +
        `${letters.length} subscripts${ellipsisAt < 0 ? " and no ellipsis" : ""}`);
    }
    return ellipsisAt < 0 ? 0 : extra;
  });
  const ellRank = Math.max(0, ...ellipsisRanks);
  // Ellipsis dims align at the right, as broadcasting does.
  const inputs = scanned.map(({ letters, ellipsisAt }, i) => {
    if (ellipsisAt < 0) return letters;
    const k = ellipsisRanks[i]!;
    const ell = Array.from({ length: k }, (_, j) => ELLIPSIS + ellRank - k + j);
    return [...letters.slice(0, ellipsisAt), ...ell, ...letters.slice(ellipsisAt)];
  });
  const anyEllipsis = scanned.some((s) => s.ellipsisAt >= 0);
  const allEll = Array.from({ length: ellRank }, (_, j) => ELLIPSIS + j);
  let output: number[];
  if (arrow < 0) {
    // Implicit mode: the ellipsis dims, then the letters seen exactly once, alphabetically.
    const counts = new Map<number, number>();
    for (const s of scanned) for (const l of s.letters) counts.set(l, (counts.get(l) ?? 0) + 1);
    const once = [...counts].filter(([, c]) => c === 1).map(([l]) => l);
    output = [...allEll, ...once.sort((x, y) => x - y)];
  } else {
    const { letters, ellipsisAt } = scanTerm(b, eq.slice(arrow + 2), "the output");
    if (ellipsisAt >= 0 && !anyEllipsis) {
      fail(b, `the output has an ellipsis but no operand term has one`);
    }
    const seen = new Set<number>();
    for (const l of letters) {
      if (seen.has(l)) fail(b, `output subscript ${labelName(l)} appears more than once`);
      seen.add(l);
      if (!scanned.some((s) => s.letters.includes(l))) {
        fail(b, `output subscript ${labelName(l)} does not appear in any operand's term`);
      }
    }
    output =
      ellipsisAt < 0
        ? letters
        : [...letters.slice(0, ellipsisAt), ...allEll, ...letters.slice(ellipsisAt)];
  }
  return { inputs, output };
}

/** An IR value with the subscript label of each dim. */
interface Labeled {
  x: Instruction;
  labels: number[];
}

/** Takes the diagonal of every subscript repeated within one operand ("ii->i"; sizes checked). */
function takeDiagonals(b: ComputationBuilder, v: Labeled): Labeled {
  let { x, labels } = v;
  for (;;) {
    const q = labels.findIndex((l, i) => labels.indexOf(l) !== i);
    if (q < 0) return { x, labels };
    const l = labels[q]!;
    const pos = labels.indexOf(l);
    const dims = dimsOf(x);
    const n = dims[pos]!;
    const rest = labels.map((_, i) => i).filter((i) => i !== pos && i !== q);
    const moved = rest.length === labels.length - 2 && pos === labels.length - 2 && q === pos + 1
      ? x
      : b.transpose(x, [...rest, pos, q]);
    const outer = rest.map((i) => dims[i]!);
    const flat = b.reshape(moved, [...outer, n * n]);
    // Elements 0, n+1, 2(n+1), ... of the flattened n x n block are its diagonal.
    const starts = [...outer.map(() => 0), 0];
    const limits = [...outer, n * n];
    const strides = [...outer.map(() => 1), n + 1];
    x = b.slice(flat, starts, limits, strides);
    labels = [...rest.map((i) => labels[i]!), l];
  }
}

/** Sums dims (torch.sum's dtype rule: integral and bool sums are int64). */
function sumDims(b: ComputationBuilder, v: Labeled, drop: readonly number[]): Labeled {
  if (drop.length === 0) return v;
  const t = dtypeOf(v.x);
  const outT = isFloatingDType(t) ? t : DEFAULT_INT;
  const acc = cast(b, cast(b, v.x, outT), computeType(outT));
  const dims = v.labels.map((l, i) => (drop.includes(l) ? i : -1)).filter((i) => i >= 0);
  const r = reduce(b, acc, dims, "add", 0, false);
  return { x: cast(b, r, outT), labels: v.labels.filter((l) => !drop.includes(l)) };
}

/** Broadcasts size-1 dims of `v` to the sizes its labels have in `sizes`. */
function expandLabels(b: ComputationBuilder, v: Labeled, sizes: Map<number, number>): Labeled {
  const dims = dimsOf(v.x);
  const target = v.labels.map((l) => sizes.get(l)!);
  if (target.every((d, i) => d === dims[i])) return v;
  return { x: broadcastTo(b, v.x, target), labels: v.labels };
}

/** One dot of two labeled operands; `needed` are the labels used after this step. */
function contractPair(
  b: ComputationBuilder,
  l: Labeled,
  r: Labeled,
  needed: ReadonlySet<number>,
): Labeled {
  const shared = l.labels.filter((x) => r.labels.includes(x));
  const batch = shared.filter((x) => needed.has(x));
  const contract = shared.filter((x) => !needed.has(x));
  const lt = dtypeOf(l.x);
  const rt = dtypeOf(r.x);
  let t = lt === rt ? lt : promoteTypes(lt, rt);
  let u = cast(b, l.x, t);
  let v = cast(b, r.x, t);
  const boolean = t === "bool";
  if (boolean) {
    if (contract.length > 0) {
      fail(b, `bool operands cannot be summed over (subscript ` +
        `${contract.map(labelName).join(", ")}); convert them to a numeric dtype first`);
    }
    // Without a sum, a product of 0/1 values is their logical and.
    t = "int32";
    u = cast(b, u, t);
    v = cast(b, v, t);
  }
  const pos = (x: Labeled, ls: readonly number[]) => ls.map((q) => x.labels.indexOf(q));
  const d = b.dot(u, v, {
    lhsBatch: pos(l, batch),
    rhsBatch: pos(r, batch),
    lhsContracting: pos(l, contract),
    rhsContracting: pos(r, contract),
  });
  const labels = [
    ...batch,
    ...l.labels.filter((x) => !shared.includes(x)),
    ...r.labels.filter((x) => !shared.includes(x)),
  ];
  return { x: boolean ? cast(b, d, "bool") : d, labels };
}

const einsumOp = defineOp({
  name: "einsum",
  signature: [
    p.custom<"equation", string>("equation", (v) =>
      typeof v === "string" ? v : problem("must be a string"),
    ),
    p.tensors("operands"),
  ],
  lower(b, xs, { equation }) {
    if (xs.length === 0) fail(b, `at least one operand is needed`);
    const { inputs, output } = parseEquation(b, equation, xs.map(rankOf));
    const t0 = dtypeOf(xs[0]!);
    xs.forEach((x, i) => {
      if (dtypeOf(x) !== t0) {
        fail(b, `expected all operands to have the same dtype, got ${t0} (operand 0) and ` +
          `${dtypeOf(x)} (operand ${i})`);
      }
    });
    // A subscript repeated within one operand (a diagonal) needs equal sizes.
    xs.forEach((x, i) => {
      const ls = inputs[i]!;
      ls.forEach((l, k) => {
        const first = ls.indexOf(l);
        const dims = dimsOf(x);
        if (first < k && dims[first] !== dims[k]) {
          fail(b, `subscript ${labelName(l)} is repeated for operand ${i} but the sizes ` +
            `don't match, ${dims[first]} != ${dims[k]}`);
        }
      });
    });
    // Each label's size: the sizes of its occurrences agree, or are 1 and broadcast.
    const sizes = new Map<number, number>();
    xs.forEach((x, i) => {
      inputs[i]!.forEach((l, k) => {
        const d = dimsOf(x)[k]!;
        const have = sizes.get(l);
        if (have === undefined || have === 1) sizes.set(l, d);
        else if (d !== have && d !== 1) {
          fail(b, `subscript ${labelName(l)} has size ${d} for operand ${i}, which does not ` +
            `broadcast with size ${have} (operand shapes ${shapesOf(xs)})`);
        }
      });
    });
    let vals: Labeled[] = xs.map((x, i) => takeDiagonals(b, { x, labels: inputs[i]! }));
    // Labels only one operand has and the output lacks are summed in that operand at once.
    vals = vals.map((v, i) => {
      const drop = [...new Set(v.labels)].filter(
        (l) => !output.includes(l) && !vals.some((w, j) => j !== i && w.labels.includes(l)),
      );
      return sumDims(b, v, drop);
    });
    let acc = expandLabels(b, vals[0]!, sizes);
    for (let k = 1; k < vals.length; k++) {
      const needed = new Set<number>(output);
      for (const w of vals.slice(k + 1)) for (const l of w.labels) needed.add(l);
      acc = contractPair(b, acc, expandLabels(b, vals[k]!, sizes), needed);
    }
    const perm = output.map((l) => acc.labels.indexOf(l));
    return perm.every((q, i) => q === i) ? acc.x : b.transpose(acc.x, perm);
  },
});

/** einsum's call forms (operands spread as torch.einsum, or a list), plus the op's identity. */
export interface EinsumFunction {
  (equation: string, ...operands: Tensor[]): Tensor;
  (equation: string, operands: readonly Tensor[]): Tensor;
  (options: { equation: string; operands: readonly Tensor[] }): Tensor;
  readonly opName: string;
  readonly signature: typeof einsumOp.signature;
  readonly definition: OpDefinition;
}

/**
 * `einsum("ij,jk->ik", a, b)` (operands spread, as torch.einsum) or `einsum(eq, [a, b])`: sums
 * of products over subscripts, in Einstein's notation.
 */
export const einsum: EinsumFunction = Object.assign(
  (...args: unknown[]): Tensor => {
    const call = einsumOp as unknown as (...a: unknown[]) => Tensor;
    const [eq, ...rest] = args;
    if (typeof eq === "string" && rest.every((x) => x instanceof Tensor)) return call(eq, rest);
    return call(...args);
  },
  { opName: einsumOp.opName, signature: einsumOp.signature, definition: einsumOp.definition },
);

// ---- Methods --------------------------------------------------------------------------------

installMethods({ bmm, outer, baddbmm });

declare module "../tensor.ts" {
  interface Tensor {
    bmm: MethodOf<typeof bmm>;
    outer: MethodOf<typeof outer>;
    baddbmm: MethodOf<typeof baddbmm>;
  }
}
