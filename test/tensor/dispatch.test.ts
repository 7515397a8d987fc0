// The dispatcher: the eager op cache (a second identical call is a hit; another shape, dtype or
// attribute a miss; scalar operand values never key it; LRU eviction), metadata.opType on every
// lowered instruction, pluggable dispatch modes, defining ops (lowerings with several results,
// decompositions), the eager backend choice, and IR errors surfacing as OpErrors.

import { afterEach, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { ShapeError } from "../../ir/errors.ts";
import type { Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import {
  interpreterBackend,
  registerBackend,
  UnsupportedError,
  type Backend,
} from "../../runtime/index.ts";
import { p } from "../../tensor/args.ts";
import {
  currentMode,
  defineDecomposition,
  defineOp,
  eagerMode,
  installMethods,
  lowerOp,
  opCacheStats,
  registeredOps,
  resetOpCache,
  setEagerBackend,
  setOpCacheCapacity,
  withMode,
  type DispatchMode,
} from "../../tensor/dispatch.ts";
import { OpError, ops, tensor, zeros, zerosLike } from "../../tensor/index.ts";
import { operandParameter } from "../../tensor/dispatch.ts";
import { elementwise, filledLike, reduce } from "../../tensor/lower.ts";

afterEach(() => {
  setOpCacheCapacity(4096);
  setEagerBackend(undefined);
});

describe("eager op cache", () => {
  it("hits on an identical call and misses on another shape, dtype or attribute", () => {
    resetOpCache();
    const x = tensor([
      [1, 2],
      [3, 4],
    ]);
    const y = tensor([1, 2]);
    x.add(y);
    expect(opCacheStats()).toMatchObject({ hits: 0, misses: 1, size: 1 });
    x.add(y);
    expect(opCacheStats()).toMatchObject({ hits: 1, misses: 1, size: 1 });
    tensor([5, 6]).add(tensor([7, 8])); // another shape
    expect(opCacheStats()).toMatchObject({ hits: 1, misses: 2 });
    x.add(y.to("float16")); // another dtype (the `to` itself is a miss too)
    expect(opCacheStats()).toMatchObject({ hits: 1, misses: 4 });
    x.add(y, { alpha: 2 }); // another attribute
    expect(opCacheStats().misses).toBe(5);
    x.add(y, { alpha: 2 });
    expect(opCacheStats().hits).toBe(2);
  });

  it("scalar operands key by kind, not value", () => {
    resetOpCache();
    const x = tensor([1, 2, 3]);
    expect(x.add(1.5).toArray()).toEqual([2.5, 3.5, 4.5]);
    expect(x.add(2.5).toArray()).toEqual([3.5, 4.5, 5.5]);
    expect(opCacheStats()).toMatchObject({ hits: 1, misses: 1 });
    x.add(2); // an int scalar is another kind
    expect(opCacheStats().misses).toBe(2);
    expect(ops.full([2], 3).toArray()).toEqual([3, 3]);
    expect(ops.full([2], 4).toArray()).toEqual([4, 4]);
    expect(opCacheStats()).toMatchObject({ hits: 2, misses: 3 });
  });

  it("evicts the least recently used entry beyond its capacity", () => {
    resetOpCache();
    setOpCacheCapacity(2);
    const a = tensor([1]);
    const b = tensor([1, 2]);
    const c = tensor([1, 2, 3]);
    a.neg();
    b.neg();
    a.neg(); // a is now the most recent
    c.neg(); // evicts b
    expect(opCacheStats()).toMatchObject({ size: 2, evictions: 1, hits: 1, misses: 3 });
    a.neg();
    expect(opCacheStats().hits).toBe(2);
    b.neg();
    expect(opCacheStats().misses).toBe(4);
    expect(() => setOpCacheCapacity(0)).toThrow(/capacity must be >= 1/);
  });
});

describe("dispatch modes", () => {
  /** A mode that records each op's one-op module (with a source location) and runs eagerly. */
  function recordingMode(modules: Module[], names: string[]): DispatchMode {
    return {
      name: "recording",
      run(op, operands, attrs) {
        names.push(op.name);
        const mb = new ModuleBuilder(op.name);
        mb.entry("main", (b) => {
          const params = operands.map((o) => operandParameter(b, o));
          const r = lowerOp(b, op, params, attrs, { sourceFile: "model.ts", sourceLine: 7 });
          return Array.isArray(r) ? b.tuple(r) : r;
        });
        modules.push(mb.build());
        return eagerMode.run(op, operands, attrs);
      },
    };
  }

  it("every lowered instruction records the op in metadata.opType", () => {
    const modules: Module[] = [];
    const names: string[] = [];
    const x = tensor([
      [1, 2],
      [3, 4],
    ]);
    const out = withMode(recordingMode(modules, names), () => x.matmul(x).add(1).sum(1));
    expect(out.toArray()).toEqual([19, 39]);
    expect(names).toEqual(["matmul", "add", "sum"]);
    modules.forEach((m, i) => {
      const lowered = [...m.entry.instructions].filter((ins) => ins.opcode !== "parameter");
      expect(lowered.length).toBeGreaterThan(0);
      for (const ins of lowered) {
        expect(ins.metadata).toMatchObject({
          opType: names[i],
          sourceFile: "model.ts",
          sourceLine: 7,
        });
      }
    });
    expect(printHlo(modules[0]!)).toContain('op_type="matmul"');
    expect(currentMode()).toBe(eagerMode);
  });

  it("decompositions dispatch the ops they are made of; the mode is restored on errors", () => {
    const names: string[] = [];
    withMode(recordingMode([], names), () => zerosLike(tensor([1, 2])));
    expect(names).toEqual(["zeros"]);
    expect(() => withMode(recordingMode([], []), () => tensor([1]).sum(4))).toThrow(OpError);
    expect(currentMode()).toBe(eagerMode);
  });
});

describe("defining ops", () => {
  // Names are test-specific so they never collide with the op library.
  const sumAndMax = defineOp({
    name: "testSumAndMax",
    signature: [p.tensor("input"), p.int("dim")],
    lower(b, [x], { dim }) {
      return [reduce(b, x!, [dim], "add", 0, false), reduce(b, x!, [dim], "max", -Infinity, false)];
    },
  });
  const square = defineDecomposition({
    name: "testSquare",
    signature: [p.tensor("input")],
    decompose: ({ input }) => ops.mul(input, input),
  });
  const scaledAdd = defineOp({
    name: "testScaledAdd",
    signature: [p.tensorOrScalar("input"), p.tensorOrScalar("other"), p.number("scale").default(1)],
    lower(b, [x, y], { scale }) {
      const { operands } = elementwise(b, [x!, y!]);
      return b.multiply(b.add(operands[0]!, operands[1]!), filledLike(b, operands[0]!, scale));
    },
  });
  installMethods({ testSquare: square });

  it("a lowering with several results returns several tensors", () => {
    const [s, m] = sumAndMax(
      tensor([
        [1, 5],
        [3, 2],
      ]),
      1,
    );
    expect(s!.toArray()).toEqual([6, 5]);
    expect(m!.toArray()).toEqual([5, 3]);
    expect(registeredOps().get("testSumAndMax")?.kind).toBe("lowering");
  });

  it("decompositions and installed methods", () => {
    expect(square(tensor([3, -2])).toArray()).toEqual([9, 4]);
    const method = (
      tensor([4]) as unknown as { testSquare(): { toArray(): unknown } }
    ).testSquare();
    expect(method.toArray()).toEqual([16]);
    expect(registeredOps().get("testSquare")?.kind).toBe("decomposition");
  });

  it("promotion helpers see JS scalars as wrapped numbers", () => {
    expect(scaledAdd(tensor([1, 2]), 1, { scale: 2 }).toArray()).toEqual([4, 6]);
    expect(scaledAdd(tensor([1, 2], { dtype: "float16" }), 1.5).dtype).toBe("float16");
  });

  it("refuses duplicate op names and methods", () => {
    expect(() =>
      defineOp({ name: "testSumAndMax", signature: [p.tensor("input")], lower: (_b, [x]) => x! }),
    ).toThrow("op 'testSumAndMax' is defined twice");
    expect(() => installMethods({ add: square })).toThrow("Tensor.add is already defined");
  });

  it("an IR error escaping a lowering becomes an OpError naming the op and input shapes", () => {
    const bad = defineOp({
      name: "testBadLowering",
      signature: [p.tensor("input"), p.tensor("other")],
      lower: (b, [x, y]) => b.add(x!, y!), // no broadcasting: HLO rejects [2] + [3]
    });
    let err: unknown;
    try {
      bad(zeros(2), zeros(3));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OpError);
    expect((err as OpError).message).toMatch(
      /^testBadLowering: cannot lower for inputs \(f32\[2\], f32\[3\]\): add\(f32\[2\], f32\[3\]\)/,
    );
    expect((err as OpError).cause).toBeInstanceOf(ShapeError);
  });
});

describe("eager backend", () => {
  it("runs on the named backend, compiling once per cached program", () => {
    let compiles = 0;
    const counting: Backend = {
      name: "test-counting",
      priority: -10,
      compile(module) {
        compiles++;
        return { ...interpreterBackend.compile(module), backend: "test-counting" };
      },
    };
    registerBackend(counting);
    setEagerBackend("test-counting");
    resetOpCache();
    const x = tensor([1, 2]);
    expect(x.exp().neg().exp().neg().shape).toEqual([2]);
    expect(compiles).toBe(2);
    setEagerBackend(undefined);
    x.exp();
    expect(compiles).toBe(2);
    expect(() => setEagerBackend("no-such-backend")).toThrow(/unknown backend 'no-such-backend'/);
  });

  it("falls back to the interpreter when the backend declines a module", () => {
    registerBackend({
      name: "test-declining",
      priority: -10,
      compile(module) {
        throw new UnsupportedError("test-declining", "declines everything", module.entry.root.name);
      },
    });
    setEagerBackend("test-declining");
    resetOpCache();
    expect(tensor([1, 2]).add(1).toArray()).toEqual([2, 3]);
    expect(opCacheStats().misses).toBe(1);
  });
});

describe("eager views", () => {
  const storageOf = (t: ReturnType<typeof tensor>) => t.realize().storage;

  it("a reshape, a flatten or a leading-dim narrow shares the operand's storage, runs no kernel", () => {
    let compiles = 0;
    registerBackend({
      name: "test-views",
      priority: -10,
      compile(module) {
        compiles++;
        return { ...interpreterBackend.compile(module), backend: "test-views" };
      },
    });
    setEagerBackend("test-views");
    resetOpCache();
    const x = tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { shape: [3, 4] });
    const r = x.reshape([2, 6]);
    expect(r.shape).toEqual([2, 6]);
    expect(r.toArray()).toEqual([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]);
    expect(storageOf(r)).toBe(storageOf(x));
    const f = ops.flatten(x.reshape([3, 2, 2]), 1);
    expect(f.shape).toEqual([3, 4]);
    expect(storageOf(f).buffer).toBe(storageOf(x).buffer);
    // Rows 1..2 of [3, 4]: contiguous, a subarray at offset 4.
    const n = ops.narrow(x, 0, 1, 2);
    expect(n.toArray()).toEqual([[5, 6, 7, 8], [9, 10, 11, 12]]);
    expect(storageOf(n).buffer).toBe(storageOf(x).buffer);
    expect(storageOf(n).byteOffset).toBe(4 * 4);
    // One row, part of it: still contiguous.
    const part = ops.narrow(ops.narrow(x, 0, 2, 1), 1, 1, 2);
    expect(part.toArray()).toEqual([[10, 11]]);
    expect(storageOf(part).buffer).toBe(storageOf(x).buffer);
    expect(storageOf(part).byteOffset).toBe(9 * 4);
    expect(compiles).toBe(0);
    // A column is not contiguous: computed by a kernel into its own storage.
    const col = ops.narrow(x, 1, 1, 1);
    expect(col.toArray()).toEqual([[2], [6], [10]]);
    expect(storageOf(col).buffer).not.toBe(storageOf(x).buffer);
    expect(compiles).toBe(1);
    // A view of a view, then math on it, reads the right elements.
    expect(ops.narrow(n.reshape([8]), 0, 3, 2).add(100).toArray()).toEqual([108, 109]);
  });
});
