// The gradient cases of every differentiable frontend op, and the status of every registered op
// (the data docs/ops.md's "grad" column is generated from; scripts/gen_ops_doc.ts reads
// `gradStatus`). grad_ops.test.ts checks each case against float64 central differences and
// through the eager autograd path; grad_fixtures.test.ts checks the PyTorch fixtures
// (test/fixtures/grad.json). Shapes are small: each f64 check evaluates the forward twice per
// input element.

import { ops, tensor, type Tensor } from "../../tensor/index.ts";
import type { GradCase, Input } from "./grad_check.ts";

/** Why an op's (or one case's) gradient cannot be taken yet. */
export interface Pending {
  /** The opcode the error names: "autodiff: no derivative for <opcode> ...". */
  readonly opcode: string;
  /** Which form of it (the rule exists for others). */
  readonly detail?: string;
  /** The op defines its own derivative: eager (and lazy, compiled) backward works. */
  readonly ownVjp?: true;
}

/**
 * Ops (or single cases, by case name) whose gradient cannot be taken yet because the IR
 * derivative rule of an opcode their lowering uses is missing or refuses that form on main
 * (passes/autodiff_rules.ts). grad_ops.test.ts asserts that every such case still fails with
 * "no derivative for <opcode>" in the f64 check, and in eager backward unless the op has its
 * own derivative (`ownVjp`: then eager backward is checked against f64 central differences):
 * when the rule lands, that test fails and the entry leaves this list.
 */
export const PENDING_RULES: Readonly<Record<string, Pending>> = {
  // The op's own derivative (defineOp vjp, PyTorch's formula) serves eager, lazy and compiled
  // training; only the IR-level rule (vjpModule over a raw module) is missing. Their cases
  // check eager backward against f64 central differences instead of the rules.
  prod: { opcode: "reduce", detail: "multiply reducer", ownVjp: true },
  sort: { opcode: "sort", ownVjp: true },
  topk: { opcode: "sort", ownVjp: true },
  maxPool2dWithIndices: {
    opcode: "reduce-window",
    detail: "variadic (values, indices)",
    ownVjp: true,
  },
};

/**
 * Cases whose gradient is wrong, found by these checks and left alone (the op's owner fixes
 * them), with what is wrong. grad_ops.test.ts asserts each is still wrong, so a fix shows and
 * the entry leaves this list.
 */
export const KNOWN_WRONG: Readonly<Record<string, string>> = {};

/**
 * PyTorch fixture cases (test/fixtures/grad.json) where Kiln's gradient is not PyTorch's, and
 * how. grad_fixtures.test.ts asserts each still differs, so a fix (or a change of convention)
 * shows and the entry leaves this list. Left alone here: each is the op's or the rule's to fix.
 */
export const DIFFERS_FROM_PYTORCH: Readonly<Record<string, string>> = {
  // Overflow inside the formula (not in a discarded branch, which pow, softplus and elu guard):
  // mish's softplus and silu's exp(-x) for x << 0 are inf in float32, and their rules multiply
  // by it. PyTorch: 1 (or 0) in the limits.
  "mish/large": "NaN for x = 100 (its softplus's exp overflows)",
  "silu/large": "NaN for x = -100 (exp(-x) overflows)",
};

/** Whether a case (a GradCase or a fixture case) is pending, and why. */
export function pendingOf(k: { readonly name: string; readonly op: string }): Pending | undefined {
  return PENDING_RULES[k.name] ?? PENDING_RULES[k.op];
}

/** Ops with no gradient to check, and why (docs/ops.md says "no (<why>)"). */
export const NO_GRADIENT: Readonly<Record<string, string>> = {
  // Integer or bool results: never require grad (docs/training.md).
  all: "bool result",
  any: "bool result",
  argmax: "integer result",
  argmin: "integer result",
  eq: "bool result",
  ne: "bool result",
  lt: "bool result",
  le: "bool result",
  gt: "bool result",
  ge: "bool result",
  isfinite: "bool result",
  isinf: "bool result",
  isnan: "bool result",
  logicalAnd: "bool result",
  logicalOr: "bool result",
  logicalXor: "bool result",
  logicalNot: "bool result",
  oneHot: "integer result",
  // No tensor the result depends on.
  arange: "creation op",
  eye: "creation op",
  full: "creation op",
  linspace: "creation op",
  ones: "creation op",
  zeros: "creation op",
  fullLike: "creation op: the result does not depend on the input's values",
  onesLike: "creation op: the result does not depend on the input's values",
  zerosLike: "creation op: the result does not depend on the input's values",
};

/**
 * Float-valued ops that are piecewise constant: their gradient is zero (as PyTorch's), which
 * their cases check (finite differences away from the jumps are zero too).
 */
export const ZERO_GRADIENT: ReadonlySet<string> = new Set(["ceil", "floor", "round", "sign", "trunc"]);

// ---- Input helpers ----------------------------------------------------------------------------

const f = (...shape: number[]): Input => ({ shape });
const fr = (range: [number, number], ...shape: number[]): Input => ({ shape, range });
/** A float input that is not differentiated (a target, a mask of values). */
const fixed = (range: [number, number], ...shape: number[]): Input => ({
  shape,
  range,
  grad: false,
});
const int = (values: number[], shape?: number[]): Input => ({
  value: () => tensor(values, { dtype: "int64", ...(shape ? { shape } : {}) }),
});
const bool = (values: boolean[], shape: number[]): Input => ({
  value: () => tensor(values, { dtype: "bool", shape }),
});

type Call = (...xs: Tensor[]) => Tensor | readonly Tensor[];
const c = (
  name: string,
  inputs: Input[],
  call: Call,
  extra: { fdTol?: number; eagerTol?: number } = {},
): GradCase => ({ name, op: name.split("/")[0]!, inputs, call, ...extra });

// A pass-through for the ops' loose typing: the cases call ops with tensors only.
const o = ops as unknown as Record<string, (...args: unknown[]) => Tensor & Tensor[]>;

// ---- The cases --------------------------------------------------------------------------------

const unary = (op: string, range: [number, number], ...rest: unknown[]): GradCase =>
  c(`${op}/basic`, [fr(range, 2, 3)], (x) => o[op]!(x, ...rest));

export const GRAD_CASES: readonly GradCase[] = [
  // Elementwise, unary.
  unary("abs", [-1, 1]),
  unary("neg", [-1, 1]),
  unary("exp", [-1, 1]),
  unary("exp2", [-1, 1]),
  unary("expm1", [-1, 1]),
  unary("log", [0.5, 2]),
  unary("log1p", [-0.5, 1]),
  unary("log2", [0.5, 2]),
  unary("sqrt", [0.5, 2]),
  unary("rsqrt", [0.5, 2]),
  unary("reciprocal", [0.5, 2]),
  c("reciprocal/negative", [fr([-2, -0.5], 3)], (x) => ops.reciprocal(x)),
  unary("sin", [-2, 2]),
  unary("cos", [-2, 2]),
  unary("tan", [-1, 1]),
  unary("tanh", [-2, 2]),
  unary("sigmoid", [-3, 3]),
  unary("erf", [-2, 2]),
  unary("relu", [-1, 1]),
  c("relu6/both_kinks", [fr([-2, 8], 3, 4)], (x) => ops.relu6(x)),
  c("leakyRelu/slope", [f(2, 3)], (x) => ops.leakyRelu(x, 0.2)),
  c("elu/alpha", [fr([-2, 2], 2, 3)], (x) => ops.elu(x, 1.5)),
  c("gelu/none", [fr([-3, 3], 2, 3)], (x) => ops.gelu(x)),
  c("gelu/tanh", [fr([-3, 3], 2, 3)], (x) => ops.gelu(x, "tanh")),
  unary("silu", [-3, 3]),
  unary("mish", [-3, 3]),
  c("softplus/default", [fr([-3, 3], 2, 3)], (x) => ops.softplus(x)),
  c("softplus/beta_threshold", [fr([-2, 2], 2, 4)], (x) => ops.softplus(x, 2, 1)),
  c("nanToNum/finite", [f(2, 3)], (x) => ops.nanToNum(x)),
  c("clamp/scalars", [fr([-2, 2], 3, 4)], (x) => ops.clamp(x, -0.5, 0.7)),
  c("clamp/min_only", [fr([-2, 2], 3, 4)], (x) => ops.clamp(x, -0.5)),
  c("clamp/tensor_bounds", [fr([-2, 2], 2, 3), fr([-1, -0.2], 3), fr([0.2, 1], 2, 1)], (x, lo, hi) =>
    ops.clamp(x, lo!, hi!)),
  c("to/float32", [f(2, 3)], (x) => x.to("float32")),
  // Piecewise constant: zero gradients (values away from the jumps).
  c("floor/basic", [fr([-2.9, 2.9], 2, 3)], (x) => ops.floor(x)),
  c("ceil/basic", [fr([-2.9, 2.9], 2, 3)], (x) => ops.ceil(x)),
  c("round/basic", [fr([-2.9, 2.9], 2, 3)], (x) => ops.round(x)),
  c("round/decimals", [fr([-2.9, 2.9], 2, 3)], (x) => ops.round(x, 1)),
  c("trunc/basic", [fr([-2.9, 2.9], 2, 3)], (x) => ops.trunc(x)),
  c("sign/basic", [f(2, 3)], (x) => ops.sign(x)),
  // Elementwise, binary (broadcasting, scalars, alpha).
  c("add/broadcast", [f(2, 3), f(3)], (x, y) => ops.add(x, y)),
  c("add/alpha_scalar", [f(2, 1, 3), f(4, 1)], (x, y) => ops.add(x, y, { alpha: 2.5 })),
  c("sub/broadcast_alpha", [f(4, 1), f(1, 3)], (x, y) => ops.sub(x, y, { alpha: 0.5 })),
  c("sub/scalar_first", [f(3)], (x) => ops.sub(2, x)),
  c("mul/broadcast", [f(2, 1, 3), f(4, 3)], (x, y) => ops.mul(x, y)),
  c("mul/scalar", [f(2, 3)], (x) => ops.mul(x, -1.5)),
  c("div/broadcast", [f(2, 3), fr([0.5, 2], 2, 1)], (x, y) => ops.div(x, y)),
  c("div/scalar_numerator", [fr([0.5, 2], 3)], (x) => ops.div(3, x)),
  c("div/rounding_floor", [fr([-3, 3], 2, 3), fr([0.5, 2], 3)], (x, y) =>
    ops.div(x, y, { roundingMode: "floor" })),
  c("pow/scalar_exponent", [fr([0.5, 2], 2, 3)], (x) => ops.pow(x, 2.5)),
  c("pow/integer_exponent", [fr([-2, 2], 2, 3)], (x) => ops.pow(x, 3)),
  c("pow/scalar_base", [f(2, 3)], (x) => ops.pow(2, x)),
  c("pow/tensors", [fr([0.5, 2], 2, 3), f(3)], (x, y) => ops.pow(x, y)),
  c("maximum/broadcast", [f(2, 3), f(3)], (x, y) => ops.maximum(x, y)),
  c("minimum/broadcast", [f(2, 3), f(2, 1)], (x, y) => ops.minimum(x, y)),
  c("where/broadcast", [bool([true, false, true], [3]), f(2, 3), f(2, 1)], (m, x, y) =>
    ops.where(m!, x!, y!)),
  c("where/scalar_other", [bool([true, false, false, true], [2, 2]), f(2, 2)], (m, x) =>
    ops.where(m!, x!, 0.5)),
  c("maskedFill/scalar", [f(2, 3), bool([true, false, false, false, true, false], [2, 3])],
    (x, m) => ops.maskedFill(x, m!, -2)),
  // Reductions.
  c("sum/all", [f(2, 3)], (x) => ops.sum(x)),
  c("sum/dims_keepdim", [f(2, 3, 4)], (x) => ops.sum(x, [0, 2], true)),
  c("mean/dims", [f(2, 3, 4)], (x) => ops.mean(x, [1, 2])),
  c("mean/keepdim", [f(3, 4)], (x) => ops.mean(x, 1, true)),
  c("prod/all", [fr([0.5, 1.5], 2, 3)], (x) => ops.prod(x)),
  c("prod/dim_keepdim", [fr([-1.5, 1.5], 3, 4)], (x) => ops.prod(x, 1, true)),
  c("amax/dims", [f(2, 3, 4)], (x) => ops.amax(x, [0, 2])),
  c("amin/keepdim", [f(3, 4)], (x) => ops.amin(x, 1, true)),
  c("max/all", [f(3, 4)], (x) => ops.max(x)),
  c("max/dim", [f(3, 4)], (x) => ops.max(x, 1)),
  c("min/dim_keepdim", [f(3, 4)], (x) => ops.min(x, 0, true)),
  c("logsumexp/dims", [fr([-3, 3], 2, 3, 4)], (x) => ops.logsumexp(x, [0, 2])),
  c("logsumexp/keepdim", [fr([-3, 3], 3, 4)], (x) => ops.logsumexp(x, 1, true)),
  c("var/dim", [f(3, 5)], (x) => ops.var(x, 1)),
  c("var/dims_biased_keepdim", [f(2, 3, 4)], (x) => ops.var(x, [0, 2], { unbiased: false, keepdim: true })),
  c("std/all", [f(3, 4)], (x) => ops.std(x)),
  c("std/correction", [f(3, 5)], (x) => ops.std(x, 0, { correction: 2 })),
  c("norm/fro", [f(3, 4)], (x) => ops.norm(x)),
  c("norm/p1_dim", [fr([0.2, 1], 3, 4)], (x) => ops.norm(x, 1, 1)),
  c("norm/p3_keepdim", [f(3, 4)], (x) => ops.norm(x, 3, 0, true)),
  c("norm/inf", [f(3, 4)], (x) => ops.norm(x, Infinity)),
  c("cumsum/dim1", [f(3, 4)], (x) => ops.cumsum(x, 1)),
  c("cumsum/dim0", [f(4, 2)], (x) => ops.cumsum(x, 0)),
  c("cumprod/dim1", [fr([0.5, 1.5], 3, 4)], (x) => ops.cumprod(x, 1)),
  c("softmax/last", [fr([-2, 2], 3, 4)], (x) => ops.softmax(x, -1)),
  c("softmax/dim0", [fr([-2, 2], 3, 2, 2)], (x) => ops.softmax(x, 0)),
  c("logSoftmax/last", [fr([-2, 2], 3, 4)], (x) => ops.logSoftmax(x, -1)),
  c("logSoftmax/dim1", [fr([-2, 2], 2, 3, 2)], (x) => ops.logSoftmax(x, 1)),
  c("sort/values", [f(3, 4)], (x) => ops.sort(x, 1)),
  c("sort/descending_dim0", [f(4, 3)], (x) => ops.sort(x, 0, true)),
  c("topk/largest", [f(3, 5)], (x) => ops.topk(x, 2)),
  c("topk/smallest_dim0", [f(5, 3)], (x) => ops.topk(x, 2, 0, false)),
  // Shape ops.
  c("reshape/basic", [f(2, 6)], (x) => ops.reshape(x, [3, 4])),
  c("view/basic", [f(2, 6)], (x) => ops.view(x, [4, 3])),
  c("flatten/range", [f(2, 3, 2)], (x) => ops.flatten(x, 1)),
  c("unflatten/basic", [f(2, 6)], (x) => ops.unflatten(x, 1, [2, 3])),
  c("squeeze/dim", [f(2, 1, 3)], (x) => ops.squeeze(x, 1)),
  c("unsqueeze/dim", [f(2, 3)], (x) => ops.unsqueeze(x, 1)),
  c("permute/3d", [f(2, 3, 4)], (x) => ops.permute(x, [2, 0, 1])),
  c("transpose/basic", [f(2, 3, 4)], (x) => ops.transpose(x, 0, 2)),
  c("mT/basic", [f(2, 3, 4)], (x) => ops.mT(x)),
  c("expand/basic", [f(3, 1)], (x) => ops.expand(x, [2, 3, 4])),
  c("repeat/basic", [f(2, 3)], (x) => ops.repeat(x, [2, 1, 2])),
  c("tile/basic", [f(2, 3)], (x) => ops.tile(x, [2, 2])),
  c("cat/dim1", [f(2, 3), f(2, 1), f(2, 2)], (x, y, z) => ops.cat([x!, y!, z!], 1)),
  c("stack/dim1", [f(2, 3), f(2, 3)], (x, y) => ops.stack([x!, y!], 1)),
  c("split/sizes", [f(5, 2)], (x) => ops.split(x, [2, 3])),
  c("split/size_dim1", [f(2, 5)], (x) => ops.split(x, 2, 1)),
  c("chunk/dim1", [f(2, 5)], (x) => ops.chunk(x, 3, 1)),
  c("narrow/basic", [f(3, 5)], (x) => ops.narrow(x, 1, 1, 3)),
  c("slice/step", [f(3, 7)], (x) => ops.slice(x, 1, 1, 6, 2)),
  c("flip/dims", [f(2, 3, 2)], (x) => ops.flip(x, [0, 2])),
  c("roll/dims", [f(3, 4)], (x) => ops.roll(x, [1, -1], [0, 1])),
  c("roll/flat", [f(2, 3)], (x) => ops.roll(x, 2)),
  c("pad/constant", [f(2, 3)], (x) => ops.pad(x, [1, 2, 0, 1], "constant", 0.5)),
  c("pad/negative", [f(3, 4)], (x) => ops.pad(x, [-1, 1])),
  c("pad/reflect", [f(1, 2, 4)], (x) => ops.pad(x, [2, 1], "reflect")),
  c("pad/replicate", [f(1, 2, 3)], (x) => ops.pad(x, [1, 2], "replicate")),
  c("pad/circular", [f(1, 2, 3)], (x) => ops.pad(x, [1, 2], "circular")),
  c("tril/basic", [f(3, 4)], (x) => ops.tril(x)),
  c("triu/diagonal", [f(2, 3, 3)], (x) => ops.triu(x, 1)),
  // Indexing.
  c("gather/dim1", [f(3, 4), int([0, 3, 1, 1, 2, 0], [3, 2])], (x, i) => ops.gather(x, 1, i!)),
  c("indexSelect/repeats", [f(4, 3), int([2, 0, 2])], (x, i) => ops.indexSelect(x, 0, i!)),
  c("embedding/basic", [int([1, 3, 1, 0], [2, 2]), f(4, 3)], (i, w) => ops.embedding(i, w!)),
  {
    ...c("embedding/padding_idx", [int([1, 3, 1, 0], [2, 2]), f(4, 3)], (i, w) =>
      ops.embedding(i, w!, 1)),
    // PyTorch's convention (embedding's own vjp): row 1, the paddingIdx, gets no gradient.
    convention: (a, g) => (a === 1 ? g.map((v, j) => (j >= 3 && j < 6 ? 0 : v)) : g),
  },
  c("scatter/src", [f(3, 4), int([0, 2, 1, 3], [2, 2]), f(2, 2)], (x, i, s) =>
    ops.scatter(x, 1, i!, s!)),
  c("scatter/scalar", [f(3, 4), int([0, 2, 1, 3], [2, 2])], (x, i) => ops.scatter(x, 1, i!, 0.5)),
  c("scatterAdd/duplicates", [f(3, 4), int([0, 0, 1, 3, 3, 3], [3, 2]), f(3, 2)], (x, i, s) =>
    ops.scatterAdd(x, 1, i!, s!)),
  c("dynamicUpdateSlice/basic", [f(4, 5), f(2, 3), int([1, 2])], (x, u, s) =>
    ops.dynamicUpdateSlice(x, u!, s!)),
  // Linear algebra.
  c("matmul/2d", [f(2, 3), f(3, 4)], (x, y) => ops.matmul(x, y)),
  c("matmul/batched_broadcast", [f(2, 1, 2, 3), f(3, 3, 2)], (x, y) => ops.matmul(x, y)),
  c("matmul/vector_matrix", [f(3), f(2, 3, 4)], (x, y) => ops.matmul(x, y)),
  c("matmul/matrix_vector", [f(2, 3), f(3)], (x, y) => ops.matmul(x, y)),
  c("matmul/dot", [f(4), f(4)], (x, y) => ops.matmul(x, y)),
  c("bmm/basic", [f(2, 2, 3), f(2, 3, 2)], (x, y) => ops.bmm(x, y)),
  c("baddbmm/beta_alpha", [f(2, 1, 2), f(2, 2, 3), f(2, 3, 2)], (x, y, z) =>
    ops.baddbmm(x, y!, z!, { beta: 0.5, alpha: 2 })),
  c("linear/bias_3d", [f(2, 2, 3), f(4, 3), f(4)], (x, w, b) => ops.linear(x, w!, b!)),
  c("linear/no_bias", [f(2, 3), f(4, 3)], (x, w) => ops.linear(x, w!)),
  c("outer/basic", [f(3), f(4)], (x, y) => ops.outer(x, y)),
  c("einsum/matmul", [f(2, 3), f(3, 4)], (x, y) => ops.einsum("ij,jk->ik", [x!, y!])),
  c("einsum/attention_scores", [f(1, 2, 3, 4), f(1, 2, 2, 4)], (q, k) =>
    ops.einsum("bhqd,bhkd->bhqk", [q!, k!])),
  c("einsum/diagonal_sum", [f(3, 3), f(3)], (x, y) => ops.einsum("ii,i->i", [x!, y!])),
  // Convolution and pooling.
  c("conv1d/stride_pad_dilation", [f(2, 2, 7), f(3, 2, 3), f(3)], (x, w, b) =>
    ops.conv1d(x, w!, b!, { stride: 2, padding: 1, dilation: 2 })),
  c("conv1d/groups", [f(1, 4, 5), f(4, 2, 2)], (x, w) => ops.conv1d(x, w!, { groups: 2 })),
  c("conv2d/basic_bias", [f(1, 2, 4, 4), f(3, 2, 2, 2), f(3)], (x, w, b) => ops.conv2d(x, w!, b!)),
  c("conv2d/stride_pad_dilation", [f(1, 2, 5, 5), f(2, 2, 2, 2)], (x, w) =>
    ops.conv2d(x, w!, { stride: [2, 1], padding: [1, 0], dilation: [1, 2] })),
  c("conv2d/depthwise", [f(1, 2, 4, 4), f(2, 1, 2, 2)], (x, w) => ops.conv2d(x, w!, { groups: 2 })),
  c("conv2d/same", [f(1, 1, 4, 5), f(2, 1, 2, 3)], (x, w) => ops.conv2d(x, w!, { padding: "same" })),
  c("convTranspose2d/stride_pad", [f(1, 2, 3, 3), f(2, 2, 2, 2), f(2)], (x, w, b) =>
    ops.convTranspose2d(x, w!, b!, { stride: 2, padding: 1 })),
  c("convTranspose2d/groups_dilation_output_padding", [f(1, 4, 3, 2), f(4, 1, 2, 2)], (x, w) =>
    ops.convTranspose2d(x, w!, { stride: 2, outputPadding: 1, groups: 2, dilation: [1, 2] })),
  c("maxPool2d/overlap", [f(1, 2, 4, 4)], (x) => ops.maxPool2d(x, 2, 1)),
  c("maxPool2d/stride_pad_dilation", [f(1, 1, 5, 5)], (x) =>
    ops.maxPool2d(x, 2, { stride: 2, padding: 1, dilation: 2 })),
  c("maxPool2dWithIndices/values", [f(1, 2, 4, 4)], (x) => ops.maxPool2dWithIndices(x, 2)),
  c("avgPool2d/basic", [f(1, 2, 4, 4)], (x) => ops.avgPool2d(x, 2)),
  c("avgPool2d/pad_exclude_ceil", [f(1, 1, 5, 5)], (x) =>
    ops.avgPool2d(x, 2, { stride: 2, padding: 1, ceilMode: true, countIncludePad: false })),
  c("adaptiveAvgPool2d/uneven", [f(1, 2, 5, 4)], (x) => ops.adaptiveAvgPool2d(x, [3, 2])),
  c("interpolate/nearest", [f(1, 2, 2, 3)], (x) => ops.interpolate(x, { size: [4, 5] })),
  c("interpolate/bilinear", [f(1, 1, 3, 3)], (x) =>
    ops.interpolate(x, { size: [4, 5], mode: "bilinear" })),
  c("interpolate/bilinear_align", [f(1, 1, 3, 2)], (x) =>
    ops.interpolate(x, { scaleFactor: 2, mode: "bilinear", alignCorners: true })),
  c("interpolate/linear", [f(1, 2, 3)], (x) => ops.interpolate(x, { size: 5, mode: "linear" })),
  c("interpolate/nearest_exact", [f(1, 1, 3, 2)], (x) =>
    ops.interpolate(x, { size: [5, 3], mode: "nearest-exact" })),
  // Normalization.
  c("layerNorm/affine", [f(2, 3, 4), f(4), f(4)], (x, w, b) => ops.layerNorm(x, [4], w!, b!)),
  c("layerNorm/two_dims", [f(2, 2, 3)], (x) => ops.layerNorm(x, [2, 3])),
  c("rmsNorm/weight", [f(2, 4), f(4)], (x, w) => ops.rmsNorm(x, [4], w!)),
  c("groupNorm/affine", [f(2, 4, 3), f(4), f(4)], (x, w, b) => ops.groupNorm(x, 2, w!, b!)),
  c("batchNorm/train", [f(3, 2, 2), f(2), f(2)], (x, w, b) =>
    ops.batchNorm(x, null, null, w!, b!, { training: true })),
  c("batchNorm/eval", [f(3, 2, 2), fixed([-0.5, 0.5], 2), fixed([0.5, 2], 2), f(2), f(2)],
    (x, m, v, w, b) => ops.batchNorm(x, m!, v!, w!, b!)),
  c("dropout/eval", [f(2, 3)], (x) => ops.dropout(x, 0.5, false)),
  // Attention.
  c("scaledDotProductAttention/plain", [f(1, 2, 3, 4), f(1, 2, 3, 4), f(1, 2, 3, 4)],
    (q, k, v) => ops.scaledDotProductAttention(q, k!, v!)),
  c("scaledDotProductAttention/causal_scale", [f(2, 3, 4), f(2, 3, 4), f(2, 3, 2)], (q, k, v) =>
    ops.scaledDotProductAttention(q, k!, v!, { isCausal: true, scale: 0.7 })),
  c("scaledDotProductAttention/bool_mask",
    [f(1, 3, 2), f(1, 4, 2), f(1, 4, 3),
      bool([true, false, true, true, true, true, false, true, false, true, true, true], [3, 4])],
    (q, k, v, m) => ops.scaledDotProductAttention(q, k!, v!, m!)),
  c("scaledDotProductAttention/float_mask", [f(1, 3, 2), f(1, 3, 2), f(1, 3, 2), f(3, 3)],
    (q, k, v, m) => ops.scaledDotProductAttention(q, k!, v!, m!)),
  // Losses.
  c("crossEntropy/indices", [fr([-2, 2], 3, 4), int([0, 3, 1])], (x, t) => ops.crossEntropy(x, t!)),
  c("crossEntropy/ignore_smoothing", [fr([-2, 2], 4, 3), int([0, 2, -100, 1])], (x, t) =>
    ops.crossEntropy(x, t!, { labelSmoothing: 0.2 })),
  c("crossEntropy/weight_sum", [fr([-2, 2], 3, 4), int([0, 3, 1]), fixed([0.5, 2], 4)],
    (x, t, w) => ops.crossEntropy(x, t!, w!, { reduction: "sum" })),
  c("crossEntropy/spatial_none", [fr([-2, 2], 2, 3, 2), int([0, 2, 1, 1], [2, 2])], (x, t) =>
    ops.crossEntropy(x, t!, { reduction: "none" })),
  c("crossEntropy/probabilities", [fr([-2, 2], 3, 4), fixed([0, 1], 3, 4)], (x, t) =>
    ops.crossEntropy(x, t!)),
  c("nllLoss/weight_ignore", [fr([-2, 0], 4, 3), int([0, 2, 1, 2]), fixed([0.5, 2], 3)],
    (x, t, w) => ops.nllLoss(x, t!, w!, { ignoreIndex: 1 })),
  c("nllLoss/sum", [fr([-2, 0], 3, 4), int([3, 0, 1])], (x, t) =>
    ops.nllLoss(x, t!, { reduction: "sum" })),
  c("mseLoss/mean", [f(3, 4), f(3, 4)], (x, y) => ops.mseLoss(x, y)),
  c("mseLoss/none_broadcast", [f(2, 3), f(3)], (x, y) => ops.mseLoss(x, y, "none")),
  c("mseLoss/sum", [f(2, 3), fixed([-1, 1], 2, 3)], (x, y) => ops.mseLoss(x, y, "sum")),
];

// ---- Status per op ----------------------------------------------------------------------------

/** Each op's cases. */
export function casesByOp(): Map<string, GradCase[]> {
  const m = new Map<string, GradCase[]>();
  for (const k of GRAD_CASES) {
    if (!m.has(k.op)) m.set(k.op, []);
    m.get(k.op)!.push(k);
  }
  return m;
}

/**
 * What docs/ops.md's "grad" column says of an op: `yes (FD + PyTorch)` (checked against f64
 * finite differences and PyTorch's gradients), `yes (FD)`, `pending rule: <opcode>`,
 * `no (<why>)`, or `no case` (a registered op the table misses: grad_ops.test.ts fails then).
 * `fixtureOps` are the ops with a case in test/fixtures/grad.json.
 */
export function gradStatus(op: string, fixtureOps: ReadonlySet<string>): string {
  const none = NO_GRADIENT[op];
  if (none !== undefined) return `no (${none})`;
  const cases = casesByOp().get(op);
  if (cases === undefined) return "no case";
  const pending = new Set<string>();
  const wrong: string[] = [];
  let checked = 0;
  for (const k of cases) {
    const p = pendingOf(k);
    if (p !== undefined) pending.add(p.detail ? `${p.opcode} (${p.detail})` : p.opcode);
    else checked++;
    const w = KNOWN_WRONG[k.name];
    if (w !== undefined) wrong.push(w);
  }
  for (const [name, why] of Object.entries(DIFFERS_FROM_PYTORCH)) {
    if (name.split("/")[0] === op) wrong.push(`differs from PyTorch: ${why}`);
  }
  const parts: string[] = [];
  const own = cases.some((k) => pendingOf(k)?.ownVjp === true);
  if (own) {
    const how = fixtureOps.has(op) ? "FD + PyTorch" : "FD";
    parts.push(`yes (${how}; the op's own derivative, IR rule pending: ${[...pending].join(", ")})`);
  } else if (pending.size > 0) parts.push(`pending rule: ${[...pending].join(", ")}`);
  if (checked > 0 && !own) {
    const how = fixtureOps.has(op) ? "FD + PyTorch" : "FD";
    parts.push(ZERO_GRADIENT.has(op) ? `yes (${how}; zero: piecewise constant)` : `yes (${how})`);
  }
  if (wrong.length > 0) parts.push(`but ${wrong.join("; ")}`);
  return parts.join("; ");
}
