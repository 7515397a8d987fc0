// Module code generation for the `js` backend: one program function per computation that runs
// as a program (the ENTRY, call/while/conditional targets, fusions without a fast kernel,
// reducers too complex to inline), which allocates each instruction's result and calls one
// generated kernel per instruction or per fusion. Fusions map to their kernels by kind (the
// fusion contract shared with passes/fuse.ts): kLoop → one loop nest; kInput → one row kernel
// (reductions, then the epilogue); kOutput → the dot/convolution kernel with its epilogue run
// on each finished block of rows. A fusion that does not fit its kind's kernel runs its fused
// computation per instruction (correct, slower) and says so under KILN_LOGS=fusion. Values are
// typed arrays (Literal storage, never mutated once made) and JS arrays for tuples.

import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { type ArrayShape, type ElementType, type Shape, shapeToString } from "../../ir/shape.ts";
import { log } from "../../util/log.ts";
import { arrayOf, isExpressible, isFloatT, NotFast, stridesOf } from "./codegen_expr.ts";
import {
  genDynamicUpdateSliceKernel,
  genGatherKernel,
  genScatterKernel,
  genSortKernel,
} from "./codegen_indexing.ts";
import { genLoopKernel, type KernelCtx } from "./codegen_loop.ts";
import { genReduceKernel, genReduceWindowKernel, storageName } from "./codegen_reduce.ts";
import { commentText, ExtTable } from "./emitter.ts";
import { conv, planConv } from "./kernels_conv.ts";
import { dotFloat, dotInt, planDot } from "./kernels_dot.ts";
import { bitcastArray, convertArray } from "./runtime_lib.ts";

function sanitize(s: string): string {
  return s.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 40);
}

function count(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** `%add.3 = f32[4,16] add(%x, %y)` (for comments in the generated source). */
export function describe(instr: Instruction): string {
  const ops = instr.operands.map((o) => `%${o.name}`).join(", ");
  const kind = instr.attrs.fusionKind ? ` kind=${instr.attrs.fusionKind}` : "";
  const called = instr.called.length ? ` calls=${instr.called.map((c) => c.name).join(",")}` : "";
  const text = `%${instr.name} = ${shapeToString(instr.shape, false)} ${instr.opcode}(${ops})`;
  return commentText(text + kind + called);
}

/** Generates the JavaScript source of a module. */
export class ModuleGen implements KernelCtx {
  readonly ext = new ExtTable();
  /** Data arrays of constants (results that alias them are copied before they are returned). */
  readonly constants = new Set<object>();
  private readonly functions: string[] = [];
  private readonly programs = new Map<Computation, string>();
  private kernels = 0;

  constructor(readonly module: Module) {}

  kernelName(hint: string): string {
    return `k${this.kernels++}_${sanitize(hint)}`;
  }

  addFunction(source: string): void {
    this.functions.push(source);
  }

  program(c: Computation): string {
    const known = this.programs.get(c);
    if (known !== undefined) return known;
    const name = `c${this.programs.size}_${sanitize(c.name)}`;
    this.programs.set(c, name);
    this.genProgram(c, name);
    return name;
  }

  /** The whole module source: the table of externals, every function, the entry returned. */
  source(): string {
    const entry = this.program(this.module.entry);
    return [
      `// Kiln js backend: module '${commentText(this.module.name)}'`,
      `"use strict";`,
      ...this.ext.declarations(),
      "",
      ...this.functions.flatMap((f) => [f, ""]),
      `return ${entry};`,
    ].join("\n");
  }

  // ---- programs ------------------------------------------------------------------------------

  private genProgram(c: Computation, name: string): void {
    const params = c.parameters.map((_, i) => `p${i}`);
    const lines: string[] = [];
    const vals = new Map<Instruction, string>();
    for (const instr of c.instructions) this.emit(instr, vals, lines);
    lines.push(`return ${vals.get(c.root)!};`);
    const body = lines.map((l) => `  ${l}`).join("\n");
    const header = `function ${name}(${params.join(", ")}) {`;
    this.addFunction(`// computation ${commentText(c.name)}\n${header}\n${body}\n}`);
  }

  private alloc(s: Shape): string {
    if (s.kind !== "array") throw new Error("alloc of a tuple shape");
    return `new ${storageName(s.type)}(${count(s.dims)})`;
  }

  private emit(instr: Instruction, vals: Map<Instruction, string>, lines: string[]): void {
    const v = `v${instr.id}`;
    const ops = instr.operands.map((o) => vals.get(o)!);
    const set = (code: string) => {
      lines.push(`const ${v} = ${code}; // ${describe(instr)}`);
      vals.set(instr, v);
    };
    switch (instr.opcode) {
      case "parameter":
        vals.set(instr, `p${instr.attrs.parameterNumber!}`);
        return;
      case "constant": {
        const data = instr.attrs.literal!.data;
        this.constants.add(data);
        vals.set(instr, this.ext.ref(data, `data of %${instr.name}`));
        return;
      }
      case "reshape":
      case "copy":
        // Values are never mutated, and a reshape keeps row-major order: same storage.
        vals.set(instr, ops[0]!);
        return;
      case "tuple":
        set(`[${ops.join(", ")}]`);
        return;
      case "get-tuple-element":
        set(`${ops[0]!}[${instr.attrs.tupleIndex!}]`);
        return;
      case "bitcast-convert": {
        const f = this.ext.ref(bitcastArray, "bitcastArray");
        const from = arrayOf(instr.operand(0)).type;
        set(`${f}(${ops[0]!}, "${from}", "${arrayOf(instr).type}")`);
        return;
      }
      case "call":
        set(`${this.program(instr.called[0]!)}(${ops.join(", ")})`);
        return;
      case "while": {
        const cond = this.program(instr.called[0]!);
        const body = this.program(instr.called[1]!);
        lines.push(`let ${v} = ${ops[0]!}; // ${describe(instr)}`);
        lines.push(`while (${cond}(${v})[0] !== 0) ${v} = ${body}(${v});`);
        vals.set(instr, v);
        return;
      }
      case "conditional": {
        const n = instr.called.length;
        const sel = `${ops[0]!}[0]`;
        const branch =
          arrayOf(instr.operand(0)).type === "pred"
            ? `(${sel} !== 0 ? 0 : 1)`
            : `(${sel} < 0 || ${sel} >= ${n} ? ${n - 1} : ${sel})`;
        lines.push(`let ${v}; // ${describe(instr)}`);
        lines.push(`switch (${branch}) {`);
        instr.called.forEach((c, i) => {
          lines.push(`  case ${i}: ${v} = ${this.program(c)}(${ops[i + 1]!}); break;`);
        });
        lines.push(`}`);
        vals.set(instr, v);
        return;
      }
      case "get-dimension-size": {
        const d = arrayOf(instr.operand(0)).dims[instr.attrs.dimensions![0]!]!;
        const data = Int32Array.of(d);
        this.constants.add(data);
        vals.set(instr, this.ext.ref(data, `size ${d}`, `dimsize:${d}`));
        return;
      }
      case "fusion":
        this.emitFusion(instr, ops, v, lines);
        vals.set(instr, v);
        return;
      case "dot":
      case "convolution": {
        const leafVals = new Map<Instruction, string>(instr.operands.map((o, i) => [o, ops[i]!]));
        this.emitContraction(instr, instr, undefined, leafVals, v, lines);
        vals.set(instr, v);
        return;
      }
      case "reduce": {
        const leaves = [...new Set(instr.operands)];
        const name = this.kernelName(instr.name);
        const outs = genReduceKernel(this, { name, comment: describe(instr), root: instr, leaves });
        this.callMulti(instr, name, outs.shapes, leaves.map((l) => vals.get(l)!), v, lines);
        vals.set(instr, v);
        return;
      }
      case "reduce-window": {
        const name = this.kernelName(instr.name);
        genReduceWindowKernel(this, name, describe(instr), instr);
        const shapes = instr.shape.kind === "array" ? [instr.shape] : instr.shape.elements;
        this.callMulti(instr, name, shapes.map((s) => s as ArrayShape), ops, v, lines);
        vals.set(instr, v);
        return;
      }
      case "gather": {
        const name = this.kernelName(instr.name);
        genGatherKernel(this, name, describe(instr), instr);
        set(this.alloc(instr.shape));
        if (count(arrayOf(instr).dims) > 0) lines.push(`${name}(${v}, ${ops[0]}, ${ops[1]});`);
        return;
      }
      case "scatter": {
        const n = (ops.length - 1) / 2;
        const name = this.kernelName(instr.name);
        genScatterKernel(this, name, describe(instr), instr);
        const outs = ops.slice(0, n).map((o, i) => {
          lines.push(`const ${v}_${i} = ${o}.slice();`);
          return `${v}_${i}`;
        });
        lines.push(`${name}(${[...outs, ...ops.slice(n)].join(", ")});`);
        set(n === 1 ? outs[0]! : `[${outs.join(", ")}]`);
        return;
      }
      case "sort": {
        const name = this.kernelName(instr.name);
        const dims = arrayOf(instr.operand(0)).dims;
        const outs = instr.operands.map((o, i) => {
          lines.push(`const ${v}_${i} = ${this.alloc(o.shape)};`);
          return `${v}_${i}`;
        });
        if (count(dims) > 0) {
          genSortKernel(this, name, describe(instr), instr);
          lines.push(`${name}(${[...outs, ...ops].join(", ")});`);
        }
        set(outs.length === 1 ? outs[0]! : `[${outs.join(", ")}]`);
        return;
      }
      case "dynamic-update-slice": {
        lines.push(`const ${v} = ${ops[0]!}.slice(); // ${describe(instr)}`);
        vals.set(instr, v);
        if (count(arrayOf(instr.operand(1)).dims) > 0) {
          const name = this.kernelName(instr.name);
          genDynamicUpdateSliceKernel(this, name, describe(instr), instr);
          lines.push(`${name}(${v}, ${ops.slice(1).join(", ")});`);
        }
        return;
      }
      case "set-dimension-size":
      case "custom-call":
        // Rejected before code generation (runtime/js/backend.ts).
        throw new Error(`js: ${instr.opcode} reached code generation`);
      default:
        break;
    }
    if (!isExpressible(instr)) throw new Error(`js: no code generator for ${instr.opcode}`);
    const leaves = [...new Set(instr.operands)];
    const name = this.kernelName(instr.name);
    set(this.alloc(instr.shape));
    if (count(arrayOf(instr).dims) === 0) return;
    const comment = describe(instr);
    const k = genLoopKernel(this, { name, comment, root: instr, leaves, group: 1 });
    const args = leaves.map((l) => vals.get(l)!);
    lines.push(`${name}(${[v, "0", String(k.rows), ...args].join(", ")});`);
  }

  /** Allocates the outputs of a multi-output kernel, calls it, names the (tuple) result. */
  private callMulti(
    instr: Instruction,
    name: string,
    shapes: readonly ArrayShape[],
    args: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const outs = shapes.map((s, i) => {
      lines.push(`const ${v}_${i} = ${this.alloc(s)};`);
      return `${v}_${i}`;
    });
    if (shapes.some((s) => count(s.dims) > 0)) {
      lines.push(`${name}(${[...outs, ...args].join(", ")});`);
    }
    const tuple = instr.shape.kind === "tuple";
    lines.push(`const ${v} = ${tuple ? `[${outs.join(", ")}]` : outs[0]!}; // ${describe(instr)}`);
  }

  // ---- fusions -------------------------------------------------------------------------------

  private emitFusion(instr: Instruction, ops: readonly string[], v: string, lines: string[]): void {
    const comp = instr.called[0]!;
    const kind = instr.attrs.fusionKind ?? "kLoop";
    const local: string[] = [];
    try {
      switch (kind) {
        case "kLoop":
          this.loopFusion(instr, comp, ops, v, local);
          break;
        case "kInput":
          this.inputFusion(instr, comp, ops, v, local);
          break;
        case "kOutput":
          this.outputFusion(instr, comp, ops, v, local);
          break;
        case "kCustom":
          throw new NotFast("kCustom fusions have no fast kernel");
        default: {
          const never: never = kind;
          throw new NotFast(`unknown fusion kind ${String(never)}`);
        }
      }
      lines.push(...local);
    } catch (e) {
      if (!(e instanceof NotFast)) throw e;
      log("fusion", `js: %${instr.name} (${kind}) runs per instruction: ${e.message}`);
      lines.push(`const ${v} = ${this.program(comp)}(${ops.join(", ")}); // ${describe(instr)}`);
    }
  }

  private loopFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const root = comp.root;
    if (root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
    const name = this.kernelName(comp.name);
    lines.push(`const ${v} = ${this.alloc(root.shape)}; // ${describe(instr)}`);
    if (count(root.shape.dims) === 0) return;
    const k = genLoopKernel(this, {
      name,
      comment: describe(instr),
      root,
      leaves: comp.parameters,
      group: 1,
    });
    lines.push(`${name}(${[v, "0", String(k.rows), ...ops].join(", ")});`);
  }

  private inputFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const name = this.kernelName(comp.name);
    const outs = genReduceKernel(this, {
      name,
      comment: describe(instr),
      root: comp.root,
      leaves: comp.parameters,
    });
    this.callMulti(instr, name, outs.shapes, ops, v, lines);
  }

  private outputFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const contractions = comp.instructions.filter(
      (i) => i.opcode === "dot" || i.opcode === "convolution",
    );
    if (contractions.length !== 1) {
      throw new NotFast(`expected one dot or convolution, found ${contractions.length}`);
    }
    const D = contractions[0]!;
    for (const i of comp.instructions) {
      if (i !== D && !isExpressible(i)) {
        throw new NotFast(`%${i.name} (${i.opcode}) is not elementwise or data movement`);
      }
    }
    if (comp.root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
    const leafVals = new Map<Instruction, string>(comp.parameters.map((p, i) => [p, ops[i]!]));
    this.emitContraction(instr, D, comp.root === D ? undefined : comp.root, leafVals, v, lines);
  }

  /**
   * A dot or convolution `D` writing `v`, or with an epilogue `root` (a kOutput fusion) writing
   * its result to `v`. `leafVals` maps D's computation's leaves to program values; operands that
   * are not leaves (a transpose of a parameter, say) are materialized first.
   */
  private emitContraction(
    instr: Instruction,
    D: Instruction,
    root: Instruction | undefined,
    leafVals: Map<Instruction, string>,
    v: string,
    lines: string[],
  ): void {
    const t = arrayOf(D).type;
    const leaves = [...leafVals.keys()];
    const operand = (i: number): View => {
      const o = D.operand(i);
      const view = viewOf(o, leafVals);
      let code = view?.code;
      if (code === undefined) {
        const name = this.kernelName(o.name);
        const k = genLoopKernel(this, {
          name,
          comment: `operand ${i} of ${describe(D)}`,
          root: o,
          leaves,
          group: 1,
        });
        code = `${v}_op${i}`;
        lines.push(`const ${code} = ${this.alloc(o.shape)};`);
        if (count(arrayOf(o).dims) > 0) {
          const args = leaves.map((l) => leafVals.get(l)!);
          lines.push(`${name}(${[code, "0", String(k.rows), ...args].join(", ")});`);
        }
      }
      const from = arrayOf(o).type;
      if (from !== t) {
        const f = this.ext.ref(convertArray, "convertArray");
        code = `${f}(${code}, "${from}", "${t}")`;
      }
      return { code, strides: view?.strides ?? stridesOf(arrayOf(o).dims) };
    };
    const A = operand(0);
    const B = operand(1);
    const dShape = arrayOf(D);
    const target = root ? `${v}_t` : v;
    if (root) lines.push(`const ${target} = ${this.alloc(dShape)};`);
    lines.push(`const ${v} = ${this.alloc(root ? root.shape : dShape)}; // ${describe(instr)}`);
    if (count(dShape.dims) === 0 && (!root || count(arrayOf(root).dims) === 0)) return;
    let epi = "null";
    let after = "";
    if (root) {
      const rShape = arrayOf(root);
      const isDot = D.opcode === "dot";
      // A dot's epilogue runs on rows (batch and lhs free dims); a convolution's on images.
      const rowDims = isDot ? dShape.dims.length - countFree(D, 1) : 1;
      const group = sameDims(rShape.dims, dShape.dims) ? rowDims : 1;
      const name = this.kernelName(`${D.name}_epilogue`);
      const k = genLoopKernel(this, {
        name,
        comment: `epilogue of ${describe(instr)}`,
        root,
        leaves: [D, ...leaves],
        group,
        identityLeaf: D,
      });
      const args = [target, ...leaves.map((l) => leafVals.get(l)!)].join(", ");
      const inPlace =
        k.identityOnly &&
        sameDims(rShape.dims, dShape.dims) &&
        isFloatT(t) &&
        (isDot || D.attrs.convDims!.outputBatch === 0);
      if (inPlace) epi = `(lo, hi) => ${name}(${v}, lo, hi, ${args})`;
      else after = `${name}(${v}, 0, ${k.rows}, ${args});`;
    }
    lines.push(this.contractionCall(D, t, A, B, target, epi));
    if (after) lines.push(after);
  }

  private contractionCall(
    D: Instruction,
    t: ElementType,
    a: View,
    b: View,
    out: string,
    epi: string,
  ): string {
    const A = a.code;
    const B = b.code;
    const round =
      t === "f16"
        ? this.ext.ref(roundToF16, "roundToF16")
        : t === "bf16"
          ? this.ext.ref(roundToBF16, "roundToBF16")
          : "null";
    const lhs = arrayOf(D.operand(0)).dims;
    const rhs = arrayOf(D.operand(1)).dims;
    if (D.opcode === "dot") {
      const p = planDot(lhs, rhs, D.attrs.dot!, a.strides, b.strides);
      const plan = this.ext.ref(p, `dot plan of %${D.name}`);
      if (isFloatT(t)) {
        const f = this.ext.ref(dotFloat, "dotFloat");
        return `${f}(${A}, ${B}, ${out}, ${plan}, ${round}, ${epi});`;
      }
      return `${this.ext.ref(dotInt, "dotInt")}("${t}", ${A}, ${B}, ${out}, ${plan});`;
    }
    const plan = planConv(
      lhs,
      rhs,
      arrayOf(D).dims,
      D.attrs.convDims!,
      D.attrs.window!,
      D.attrs.featureGroupCount ?? 1,
      D.attrs.batchGroupCount ?? 1,
      a.strides,
      b.strides,
    );
    const p = this.ext.ref(plan, `convolution plan of %${D.name}`);
    const f = this.ext.ref(conv, "conv");
    return `${f}("${t}", ${A}, ${B}, ${out}, ${p}, ${isFloatT(t) ? round : "null"}, ${epi});`;
  }
}

/** An operand read in place: the array and its element stride per dim. */
interface View {
  code: string;
  strides: number[];
}

/**
 * A dot/convolution operand that needs no copy: a leaf, or transposes and broadcasts of one
 * (a transpose permutes the strides, a broadcast gives new dims stride 0).
 */
function viewOf(o: Instruction, leafVals: Map<Instruction, string>): View | undefined {
  const leaf = leafVals.get(o);
  if (leaf !== undefined) return { code: leaf, strides: stridesOf(arrayOf(o).dims) };
  if (o.opcode === "transpose") {
    const v = viewOf(o.operand(0), leafVals);
    if (!v) return undefined;
    return { code: v.code, strides: o.attrs.dimensions!.map((p) => v.strides[p]!) };
  }
  if (o.opcode === "broadcast") {
    const v = viewOf(o.operand(0), leafVals);
    if (!v) return undefined;
    const strides = new Array<number>(arrayOf(o).dims.length).fill(0);
    o.attrs.dimensions!.forEach((r, i) => (strides[r] = v.strides[i]!));
    return { code: v.code, strides };
  }
  return undefined;
}

/** Number of free (result) dims a dot operand contributes. */
function countFree(D: Instruction, side: 0 | 1): number {
  const dn = D.attrs.dot!;
  const rank = arrayOf(D.operand(side)).dims.length;
  const used =
    side === 0 ? [...dn.lhsBatch, ...dn.lhsContracting] : [...dn.rhsBatch, ...dn.rhsContracting];
  return rank - used.length;
}
