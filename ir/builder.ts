// The builder: how code and tests write IR. A ModuleBuilder makes computations (the ENTRY, cached
// scalar reducers, any other callee); a ComputationBuilder appends instructions, one method per
// opcode, inferring every result shape with the shape rules (ir/shape_inference.ts) so a bad call
// fails at once with a ShapeError that names the opcode, the operand shapes and the rule. The
// builder also works on an existing computation (a pass can wrap one to append instructions).

import {
  convDimsFromLabels,
  defaultWindowDim,
  type Attributes,
  type ComparisonDirection,
  type ComparisonType,
  type ConvDimensionNumbers,
  type DotDimensionNumbers,
  type FusionKind,
  type GatherDimensionNumbers,
  type Metadata,
  type PaddingDim,
  type ScatterDimensionNumbers,
  type WindowDim,
} from "./attributes.ts";
import { ShapeError } from "./errors.ts";
import { scalarLiteral, type Literal } from "./literal.ts";
import { type Computation, type Instruction, Module } from "./module.ts";
import type { Opcode } from "./opcodes.ts";
import {
  arrayShape,
  type ArrayShape,
  type ElementType,
  MAX_TUPLE_DEPTH,
  scalarShape,
  type Shape,
  shapesEqual,
  shapeToString,
  tupleDepth,
} from "./shape.ts";
import { bitcastConvertShape, inferShape } from "./shape_inference.ts";
import { verifyModule } from "./verify.ts";

export type ReducerKind = "add" | "max" | "min" | "mul" | "and" | "or";

const REDUCER_OPCODES = {
  add: "add",
  max: "maximum",
  min: "minimum",
  mul: "multiply",
  and: "and",
  or: "or",
} satisfies { [K in ReducerKind]: Opcode };

export class ModuleBuilder {
  readonly module: Module;
  private readonly reducers = new Map<string, Computation>();

  constructor(name: string) {
    this.module = new Module(name);
  }

  /** A non-entry computation; fn's return value is its ROOT. */
  computation(name: string, fn: (b: ComputationBuilder) => Instruction): Computation {
    return this.define(name, fn);
  }

  /** The ENTRY computation; fn's return value is its ROOT. */
  entry(name: string, fn: (b: ComputationBuilder) => Instruction): Computation {
    const c = this.define(name, fn);
    this.module.entry = c;
    return c;
  }

  /** A scalar reducer `(T[], T[]) -> T[]`, made once per kind and element type. */
  reducer(kind: ReducerKind, type: ElementType): Computation {
    const key = `${kind}.${type}`;
    const cached = this.reducers.get(key);
    if (cached) return cached;
    const name = this.module.uniqueComputationName(`${kind}_${type}`);
    const c = this.define(name, (b) => {
      const x = b.parameter(scalarShape(type));
      const y = b.parameter(scalarShape(type));
      return b.op(REDUCER_OPCODES[kind], [x, y]);
    });
    this.reducers.set(key, c);
    return c;
  }

  /** Runs the verifier and returns the module. */
  build(): Module {
    verifyModule(this.module);
    return this.module;
  }

  private define(name: string, fn: (b: ComputationBuilder) => Instruction): Computation {
    const comp = this.module.addComputation(name);
    try {
      const root = fn(new ComputationBuilder(comp, this));
      comp.root = root;
      return comp;
    } catch (e) {
      // A failed definition leaves no half-built computation in the module.
      this.module.removeComputation(comp);
      throw e;
    }
  }
}

/** A pad spec per dim: a PaddingDim or `[low, high, interior?]`. */
export type PadSpec = PaddingDim | readonly [number, number, number?];

export interface ConvolutionOptions {
  window: Partial<WindowDim>[];
  /** ConvDimensionNumbers or dim labels such as `b01f_01io->b01f`. */
  dims: ConvDimensionNumbers | string;
  featureGroupCount?: number;
  batchGroupCount?: number;
  /** Result element type when it differs from the operands' (XLA's preferred_element_type). */
  preferredType?: ElementType;
}

export type GatherDims = Partial<GatherDimensionNumbers> &
  Pick<GatherDimensionNumbers, "offsetDims" | "startIndexMap" | "indexVectorDim">;

export type ScatterDims = Partial<ScatterDimensionNumbers> &
  Pick<ScatterDimensionNumbers, "updateWindowDims" | "scatterDimsToOperandDims" | "indexVectorDim">;

export class ComputationBuilder {
  readonly computation: Computation;
  /** The module builder this computation belongs to, when it was made by one. */
  readonly moduleBuilder: ModuleBuilder | undefined;
  /** Applied to each new instruction. */
  metadata: Metadata = {};
  private nextParameter: number;

  constructor(computation: Computation, moduleBuilder?: ModuleBuilder) {
    this.computation = computation;
    this.moduleBuilder = moduleBuilder;
    this.nextParameter = computation.parameters.length;
  }

  /** Runs fn with `md` merged over the current metadata, then restores it. */
  withMetadata<T>(md: Metadata, fn: () => T): T {
    const saved = this.metadata;
    this.metadata = { ...saved, ...md };
    try {
      return fn();
    } finally {
      this.metadata = saved;
    }
  }

  /**
   * Generic: any opcode with explicit attributes, called computations and (where the shape rule
   * needs one, or to keep a layout) a declared shape, which must agree with the inferred one.
   */
  op(
    opcode: Opcode,
    operands: readonly Instruction[],
    attrs: Attributes = {},
    called: readonly Computation[] = [],
    declared?: Shape,
    name?: string,
  ): Instruction {
    const shapes = operands.map((o) => o.shape);
    const fail = (rule: string): never => {
      throw new ShapeError(
        opcode,
        shapes.map((s) => shapeToString(s, false)),
        rule,
      );
    };
    operands.forEach((o, i) => {
      if (o.parent !== this.computation) {
        fail(
          `operand ${i} %${o.name} belongs to computation '${o.parent.name}', not ` +
            `'${this.computation.name}'`,
        );
      }
    });
    for (const c of called) {
      if (c.parent !== this.computation.parent) {
        fail(`called computation '${c.name}' belongs to another module`);
      }
    }
    // Checked first: the shape rules and the proto form recurse into nested tuples.
    const tooDeep = `its shape nests tuples deeper than ${MAX_TUPLE_DEPTH} (the limit on nesting)`;
    if (declared !== undefined && tupleDepth(declared) > MAX_TUPLE_DEPTH) fail(tooDeep);
    const inferred = inferShape(opcode, shapes, attrs, called, declared);
    if (tupleDepth(inferred) > MAX_TUPLE_DEPTH) fail(tooDeep);
    if (declared !== undefined && !shapesEqual(inferred, declared)) {
      fail(
        `the declared shape ${shapeToString(declared, false)} differs from the inferred ` +
          `${shapeToString(inferred, false)}`,
      );
    }
    return this.computation.addInstruction({
      opcode,
      shape: declared ?? inferred,
      operands,
      attrs,
      called,
      metadata: { ...this.metadata },
      ...(name !== undefined ? { name } : {}),
    });
  }

  // ---- Leaves --------------------------------------------------------------------------------

  /** The next parameter (numbered 0, 1, ... in call order). */
  parameter(shape: Shape, name?: string): Instruction {
    const n = this.nextParameter;
    const p = this.op("parameter", [], { parameterNumber: n }, [], shape, name);
    this.nextParameter = n + 1;
    return p;
  }

  constant(lit: Literal): Instruction {
    return this.op("constant", [], { literal: lit }, [], lit.shape);
  }

  scalar(type: ElementType, v: number | bigint | boolean): Instruction {
    let lit: Literal;
    try {
      lit = scalarLiteral(type, v);
    } catch (e) {
      throw new ShapeError("constant", [], (e as Error).message);
    }
    return this.constant(lit);
  }

  iota(shape: ArrayShape, dim: number): Instruction {
    return this.op("iota", [], { iotaDimension: dim }, [], shape);
  }

  // ---- Unary elementwise ---------------------------------------------------------------------

  abs(x: Instruction): Instruction {
    return this.op("abs", [x]);
  }
  negate(x: Instruction): Instruction {
    return this.op("negate", [x]);
  }
  sign(x: Instruction): Instruction {
    return this.op("sign", [x]);
  }
  exp(x: Instruction): Instruction {
    return this.op("exponential", [x]);
  }
  expm1(x: Instruction): Instruction {
    return this.op("exponential-minus-one", [x]);
  }
  log(x: Instruction): Instruction {
    return this.op("log", [x]);
  }
  log1p(x: Instruction): Instruction {
    return this.op("log-plus-one", [x]);
  }
  sqrt(x: Instruction): Instruction {
    return this.op("sqrt", [x]);
  }
  rsqrt(x: Instruction): Instruction {
    return this.op("rsqrt", [x]);
  }
  cbrt(x: Instruction): Instruction {
    return this.op("cbrt", [x]);
  }
  tanh(x: Instruction): Instruction {
    return this.op("tanh", [x]);
  }
  logistic(x: Instruction): Instruction {
    return this.op("logistic", [x]);
  }
  sin(x: Instruction): Instruction {
    return this.op("sine", [x]);
  }
  cos(x: Instruction): Instruction {
    return this.op("cosine", [x]);
  }
  tan(x: Instruction): Instruction {
    return this.op("tan", [x]);
  }
  erf(x: Instruction): Instruction {
    return this.op("erf", [x]);
  }
  floor(x: Instruction): Instruction {
    return this.op("floor", [x]);
  }
  ceil(x: Instruction): Instruction {
    return this.op("ceil", [x]);
  }
  roundAfz(x: Instruction): Instruction {
    return this.op("round-nearest-afz", [x]);
  }
  roundEven(x: Instruction): Instruction {
    return this.op("round-nearest-even", [x]);
  }
  isFinite(x: Instruction): Instruction {
    return this.op("is-finite", [x]);
  }
  not(x: Instruction): Instruction {
    return this.op("not", [x]);
  }
  copy(x: Instruction): Instruction {
    return this.op("copy", [x]);
  }

  convert(x: Instruction, type: ElementType): Instruction {
    const s = x.shape;
    const declared = s.kind === "array" ? arrayShape(type, s.dims, s.dynamic) : s;
    return this.op("convert", [x], {}, [], declared);
  }

  bitcastConvert(x: Instruction, type: ElementType): Instruction {
    const s = x.shape;
    let declared: Shape = s;
    if (s.kind === "array") {
      try {
        declared = bitcastConvertShape(s, type);
      } catch {
        // The shape rule reports the problem with the operand shapes.
        declared = arrayShape(type, s.dims, s.dynamic);
      }
    }
    return this.op("bitcast-convert", [x], {}, [], declared);
  }

  // ---- Binary elementwise --------------------------------------------------------------------

  add(a: Instruction, b: Instruction): Instruction {
    return this.op("add", [a, b]);
  }
  subtract(a: Instruction, b: Instruction): Instruction {
    return this.op("subtract", [a, b]);
  }
  multiply(a: Instruction, b: Instruction): Instruction {
    return this.op("multiply", [a, b]);
  }
  divide(a: Instruction, b: Instruction): Instruction {
    return this.op("divide", [a, b]);
  }
  remainder(a: Instruction, b: Instruction): Instruction {
    return this.op("remainder", [a, b]);
  }
  power(a: Instruction, b: Instruction): Instruction {
    return this.op("power", [a, b]);
  }
  maximum(a: Instruction, b: Instruction): Instruction {
    return this.op("maximum", [a, b]);
  }
  minimum(a: Instruction, b: Instruction): Instruction {
    return this.op("minimum", [a, b]);
  }
  atan2(a: Instruction, b: Instruction): Instruction {
    return this.op("atan2", [a, b]);
  }
  and(a: Instruction, b: Instruction): Instruction {
    return this.op("and", [a, b]);
  }
  or(a: Instruction, b: Instruction): Instruction {
    return this.op("or", [a, b]);
  }
  xor(a: Instruction, b: Instruction): Instruction {
    return this.op("xor", [a, b]);
  }
  shiftLeft(a: Instruction, b: Instruction): Instruction {
    return this.op("shift-left", [a, b]);
  }
  shiftRightArithmetic(a: Instruction, b: Instruction): Instruction {
    return this.op("shift-right-arithmetic", [a, b]);
  }
  shiftRightLogical(a: Instruction, b: Instruction): Instruction {
    return this.op("shift-right-logical", [a, b]);
  }

  compare(
    a: Instruction,
    b: Instruction,
    direction: ComparisonDirection,
    comparisonType?: ComparisonType,
  ): Instruction {
    const attrs: Attributes = { direction };
    if (comparisonType !== undefined) attrs.comparisonType = comparisonType;
    return this.op("compare", [a, b], attrs);
  }

  // ---- Ternary elementwise -------------------------------------------------------------------

  select(pred: Instruction, onTrue: Instruction, onFalse: Instruction): Instruction {
    return this.op("select", [pred, onTrue, onFalse]);
  }

  clamp(min: Instruction, x: Instruction, max: Instruction): Instruction {
    return this.op("clamp", [min, x, max]);
  }

  // ---- Shape and data movement ---------------------------------------------------------------

  /**
   * Operand dim i goes to result dim broadcastDims[i]. `dims` are the result dims (`"<=N"` for a
   * bounded dynamic one); a dim the operand maps to is dynamic when the operand's dim is.
   */
  broadcast(
    x: Instruction,
    dims: readonly (number | string)[],
    broadcastDims: readonly number[],
  ): Instruction {
    const s = x.shape;
    const type = s.kind === "array" ? s.type : "f32";
    const result = this.resultShape("broadcast", [x], type, dims);
    const dynamic = [...result.dynamic];
    if (s.kind === "array") {
      broadcastDims.forEach((r, i) => {
        if (s.dynamic[i] && r >= 0 && r < dynamic.length) dynamic[r] = true;
      });
    }
    const declared = arrayShape(result.type, result.dims, dynamic);
    return this.op("broadcast", [x], { dimensions: [...broadcastDims] }, [], declared);
  }

  reshape(x: Instruction, dims: readonly (number | string)[]): Instruction {
    const s = x.shape;
    const type = s.kind === "array" ? s.type : "f32";
    return this.op("reshape", [x], {}, [], this.resultShape("reshape", [x], type, dims));
  }

  transpose(x: Instruction, permutation: readonly number[]): Instruction {
    return this.op("transpose", [x], { dimensions: [...permutation] });
  }

  reverse(x: Instruction, dims: readonly number[]): Instruction {
    return this.op("reverse", [x], { dimensions: [...dims] });
  }

  slice(
    x: Instruction,
    starts: readonly number[],
    limits: readonly number[],
    strides?: readonly number[],
  ): Instruction {
    if (limits.length !== starts.length || (strides && strides.length !== starts.length)) {
      throw new ShapeError(
        "slice",
        [shapeToString(x.shape, false)],
        `starts, limits and strides need one entry per dim (got ${starts.length}, ` +
          `${limits.length}, ${strides?.length ?? starts.length})`,
      );
    }
    const slice = starts.map((start, i) => ({
      start,
      limit: limits[i]!,
      stride: strides?.[i] ?? 1,
    }));
    return this.op("slice", [x], { slice });
  }

  dynamicSlice(
    x: Instruction,
    starts: readonly Instruction[],
    sizes: readonly number[],
  ): Instruction {
    return this.op("dynamic-slice", [x, ...starts], { dynamicSliceSizes: [...sizes] });
  }

  dynamicUpdateSlice(
    x: Instruction,
    update: Instruction,
    starts: readonly Instruction[],
  ): Instruction {
    return this.op("dynamic-update-slice", [x, update, ...starts]);
  }

  concatenate(xs: readonly Instruction[], dim: number): Instruction {
    return this.op("concatenate", xs, { dimensions: [dim] });
  }

  pad(x: Instruction, value: Instruction, padding: readonly PadSpec[]): Instruction {
    const dims: PaddingDim[] = padding.map((p) =>
      isPaddingTuple(p)
        ? { low: p[0], high: p[1], interior: p[2] ?? 0 }
        : { low: p.low, high: p.high, interior: p.interior },
    );
    return this.op("pad", [x, value], { padding: dims });
  }

  // ---- Contractions --------------------------------------------------------------------------

  /** General dot; missing dimension lists default to []. */
  dot(
    a: Instruction,
    b: Instruction,
    dims: Partial<DotDimensionNumbers>,
    preferredType?: ElementType,
  ): Instruction {
    const attrs: Attributes = {
      dot: {
        lhsBatch: [...(dims.lhsBatch ?? [])],
        rhsBatch: [...(dims.rhsBatch ?? [])],
        lhsContracting: [...(dims.lhsContracting ?? [])],
        rhsContracting: [...(dims.rhsContracting ?? [])],
      },
    };
    return this.withPreferredType("dot", [a, b], attrs, preferredType);
  }

  convolution(lhs: Instruction, rhs: Instruction, opts: ConvolutionOptions): Instruction {
    const operands = [lhs, rhs];
    let convDims: ConvDimensionNumbers;
    try {
      convDims = typeof opts.dims === "string" ? convDimsFromLabels(opts.dims) : opts.dims;
    } catch (e) {
      throw this.error("convolution", operands, (e as Error).message);
    }
    const attrs: Attributes = {
      window: this.toWindow("convolution", operands, opts.window),
      convDims,
      featureGroupCount: opts.featureGroupCount ?? 1,
      batchGroupCount: opts.batchGroupCount ?? 1,
    };
    return this.withPreferredType("convolution", operands, attrs, opts.preferredType);
  }

  // ---- Reductions, windows, indexing, sorting ------------------------------------------------

  /** N inputs reduced over `dims` with a reducer taking 2N scalars; a tuple result when N > 1. */
  reduce(
    inputs: Instruction | readonly Instruction[],
    inits: Instruction | readonly Instruction[],
    dims: readonly number[],
    reducer: Computation,
  ): Instruction {
    return this.op("reduce", [...list(inputs), ...list(inits)], { dimensions: [...dims] }, [
      reducer,
    ]);
  }

  reduceWindow(
    inputs: Instruction | readonly Instruction[],
    inits: Instruction | readonly Instruction[],
    window: Partial<WindowDim>[],
    reducer: Computation,
  ): Instruction {
    const operands = [...list(inputs), ...list(inits)];
    const attrs: Attributes = { window: this.toWindow("reduce-window", operands, window) };
    return this.op("reduce-window", operands, attrs, [reducer]);
  }

  /** Gather; collapsedSliceDims and the batching dim lists default to []. */
  gather(
    operand: Instruction,
    indices: Instruction,
    dims: GatherDims,
    sliceSizes: readonly number[],
    indicesAreSorted?: boolean,
  ): Instruction {
    const attrs: Attributes = {
      gather: {
        offsetDims: [...dims.offsetDims],
        collapsedSliceDims: [...(dims.collapsedSliceDims ?? [])],
        startIndexMap: [...dims.startIndexMap],
        indexVectorDim: dims.indexVectorDim,
        operandBatchingDims: [...(dims.operandBatchingDims ?? [])],
        startIndicesBatchingDims: [...(dims.startIndicesBatchingDims ?? [])],
      },
      gatherSliceSizes: [...sliceSizes],
    };
    if (indicesAreSorted !== undefined) attrs.indicesAreSorted = indicesAreSorted;
    return this.op("gather", [operand, indices], attrs);
  }

  /** Scatter of N inputs; insertedWindowDims and the batching dim lists default to []. */
  scatter(
    inputs: Instruction | readonly Instruction[],
    indices: Instruction,
    updates: Instruction | readonly Instruction[],
    dims: ScatterDims,
    reducer: Computation,
    opts: { indicesAreSorted?: boolean; uniqueIndices?: boolean } = {},
  ): Instruction {
    const attrs: Attributes = {
      scatter: {
        updateWindowDims: [...dims.updateWindowDims],
        insertedWindowDims: [...(dims.insertedWindowDims ?? [])],
        scatterDimsToOperandDims: [...dims.scatterDimsToOperandDims],
        indexVectorDim: dims.indexVectorDim,
        inputBatchingDims: [...(dims.inputBatchingDims ?? [])],
        scatterIndicesBatchingDims: [...(dims.scatterIndicesBatchingDims ?? [])],
      },
    };
    if (opts.indicesAreSorted !== undefined) attrs.indicesAreSorted = opts.indicesAreSorted;
    if (opts.uniqueIndices !== undefined) attrs.uniqueIndices = opts.uniqueIndices;
    return this.op("scatter", [...list(inputs), indices, ...list(updates)], attrs, [reducer]);
  }

  /** Sorts along `dim`; the comparator takes two scalars per operand and returns pred[]. */
  sort(
    operands: Instruction | readonly Instruction[],
    dim: number,
    comparator: Computation,
    isStable?: boolean,
  ): Instruction {
    const attrs: Attributes = { dimensions: [dim] };
    if (isStable !== undefined) attrs.isStable = isStable;
    return this.op("sort", list(operands), attrs, [comparator]);
  }

  // ---- Tuples and control flow ---------------------------------------------------------------

  tuple(xs: readonly Instruction[]): Instruction {
    return this.op("tuple", xs);
  }

  getTupleElement(t: Instruction, index: number): Instruction {
    return this.op("get-tuple-element", [t], { tupleIndex: index });
  }

  fusion(
    operands: readonly Instruction[],
    comp: Computation,
    kind: FusionKind = "kLoop",
  ): Instruction {
    return this.op("fusion", operands, { fusionKind: kind }, [comp]);
  }

  call(operands: readonly Instruction[], comp: Computation): Instruction {
    return this.op("call", operands, {}, [comp]);
  }

  while(init: Instruction, condition: Computation, body: Computation): Instruction {
    return this.op("while", [init], {}, [condition, body]);
  }

  /** `predOrIndex` is pred[] (two branches: true, false) or s32[] (N branches). */
  conditional(
    predOrIndex: Instruction,
    branchOperands: readonly Instruction[],
    branches: readonly Computation[],
  ): Instruction {
    return this.op("conditional", [predOrIndex, ...branchOperands], {}, branches);
  }

  // ---- Bounded dynamism and escape hatch -----------------------------------------------------

  getDimensionSize(x: Instruction, dim: number): Instruction {
    return this.op("get-dimension-size", [x], { dimensions: [dim] });
  }

  setDimensionSize(x: Instruction, size: Instruction, dim: number): Instruction {
    return this.op("set-dimension-size", [x, size], { dimensions: [dim] });
  }

  customCall(
    operands: readonly Instruction[],
    target: string,
    shape: Shape,
    backendConfig?: string,
  ): Instruction {
    const attrs: Attributes = { customCallTarget: target };
    if (backendConfig !== undefined) attrs.backendConfig = backendConfig;
    return this.op("custom-call", operands, attrs, [], shape);
  }

  // ---- Helpers -------------------------------------------------------------------------------

  private error(opcode: Opcode, operands: readonly Instruction[], rule: string): ShapeError {
    return new ShapeError(
      opcode,
      operands.map((o) => shapeToString(o.shape, false)),
      rule,
    );
  }

  /** An array shape from user dims, with a bad dim reported as a ShapeError of `opcode`. */
  private resultShape(
    opcode: Opcode,
    operands: readonly Instruction[],
    type: ElementType,
    dims: readonly (number | string)[],
  ): ArrayShape {
    try {
      return arrayShape(type, dims);
    } catch (e) {
      throw this.error(opcode, operands, (e as Error).message);
    }
  }

  private toWindow(
    opcode: Opcode,
    operands: readonly Instruction[],
    window: readonly Partial<WindowDim>[],
  ): WindowDim[] {
    return window.map((w, i) => {
      if (w.size === undefined) throw this.error(opcode, operands, `window dim ${i} needs a size`);
      return { ...defaultWindowDim(w.size), ...definedOnly(w) };
    });
  }

  /** dot/convolution: infer, then re-declare with the preferred element type if one is given. */
  private withPreferredType(
    opcode: "dot" | "convolution",
    operands: readonly Instruction[],
    attrs: Attributes,
    preferredType: ElementType | undefined,
  ): Instruction {
    if (preferredType === undefined) return this.op(opcode, operands, attrs);
    const inferred = inferShape(
      opcode,
      operands.map((o) => o.shape),
      attrs,
      [],
    );
    if (inferred.kind !== "array") throw this.error(opcode, operands, `expected an array result`);
    const declared = arrayShape(preferredType, inferred.dims, inferred.dynamic);
    return this.op(opcode, operands, attrs, [], declared);
  }
}

function list<T>(x: T | readonly T[]): T[] {
  return Array.isArray(x) ? [...(x as readonly T[])] : [x as T];
}

function isPaddingTuple(p: PadSpec): p is readonly [number, number, number?] {
  return Array.isArray(p);
}

/** The fields of `o` that are not undefined (so they do not overwrite defaults). */
function definedOnly<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
