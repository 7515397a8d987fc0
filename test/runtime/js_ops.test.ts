// The js backend's own behaviour beyond its values (those are test/runtime/backend_ops.test.ts,
// bit-identical to the evaluator for every opcode): what it rejects, with UnsupportedError
// naming the instruction; its generated source; results that never share storage with inputs.

import { describe, expect, it, vi } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { arrayShape, scalarShape } from "../../ir/shape.ts";
import { UnsupportedError } from "../../runtime/backend.ts";
import { jsBackend, type JsExecutable, jsSource } from "../../runtime/js/backend.ts";
import { setLogTopics } from "../../util/log.ts";
import { identical } from "./fixtures/op_cases.ts";

describe("js backend: rejected modules", () => {
  it("custom-call throws UnsupportedError naming the instruction", () => {
    const mb = new ModuleBuilder("cc");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [3]));
      return b.customCall([p], "my_kernel", arrayShape("f32", [3]));
    });
    const m = mb.build();
    const name = m.entry.root.name;
    let err: unknown;
    try {
      jsBackend.compile(m);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnsupportedError);
    const u = err as UnsupportedError;
    expect(u.instruction).toBe(name);
    expect(u.opcode).toBe("custom-call");
    expect(u.message).toContain(`%${name} (custom-call)`);
    expect(u.message).toContain("my_kernel");
  });

  it("set-dimension-size to a computed size throws UnsupportedError naming it", () => {
    const mb = new ModuleBuilder("sds");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [8]), "x");
      const n = b.parameter(scalarShape("s32"), "n");
      return b.negate(b.setDimensionSize(p, n, 0));
    });
    const m = mb.build();
    const sds = m.entry.instructions.find((i) => i.opcode === "set-dimension-size")!;
    expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
    expect(() => jsBackend.compile(m)).toThrow(`%${sds.name} (set-dimension-size)`);
    expect(() => jsBackend.compile(m)).toThrow(/computed at run time/);
  });

  it("rejects arguments that do not fit the parameters, naming them", () => {
    const mb = new ModuleBuilder("args");
    mb.entry("main", (b) => b.exp(b.parameter(arrayShape("f32", [2]), "x")));
    const exe = jsBackend.compile(mb.build());
    expect(() => exe.run([literal("f32", [3], [1, 2, 3])])).toThrow(/argument 0 .*'%x'/);
    expect(() => exe.run([literal("s32", [2], [1, 2])])).toThrow(/element type s32/);
    expect(() => exe.run([])).toThrow(/takes 1 argument/);
  });
});

describe("js backend: generated source", () => {
  it("is exposed, printed under KILN_LOGS=ir, and safe from names with line breaks", () => {
    const mb = new ModuleBuilder("odd\nname");
    mb.entry("main\u2028entry", (b) => b.exp(b.parameter(arrayShape("f32", [2]), "x\nreturn 1;")));
    const m = mb.build();
    const lines: string[] = [];
    setLogTopics(["ir"]);
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      const exe = jsBackend.compile(m) as JsExecutable;
      expect(exe.source).toContain("Math.exp");
      expect(jsSource(m)).toBe(exe.source);
      expect(lines.join("")).toContain("[kiln:ir] js source of module");
      const x = literal("f32", [2], [0, 1]);
      expect(identical(exe.run([x]), evaluate(m, [x]))).toBe(true);
    } finally {
      setLogTopics(undefined);
      vi.restoreAllMocks();
    }
  });
});

describe("js backend: results never share storage with inputs or constants", () => {
  it("copies a returned parameter, reshape or constant", () => {
    const x = literal("f32", [2, 2], [1, 2, 3, 4]);
    const mb = new ModuleBuilder("alias");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [2, 2]));
      return b.tuple([p, b.reshape(p, [4]), b.constant(literal("s32", [2], [5, 6]))]);
    });
    const exe = jsBackend.compile(mb.build());
    const out = exe.run([x]) as Literal[];
    (out[0]!.data as Float32Array)[0] = 99;
    (out[1]!.data as Float32Array)[1] = 99;
    (out[2]!.data as Int32Array)[0] = 99;
    expect(Array.from(x.data as Float32Array)).toEqual([1, 2, 3, 4]);
    const again = exe.run([x]) as Literal[];
    expect(Array.from(again[2]!.data as Int32Array)).toEqual([5, 6]);
  });
});
