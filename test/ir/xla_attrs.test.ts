// XLA attributes Kiln keeps without computing from them: custom-call's side-effect flag,
// api_version, operand layout constraints and output-to-operand aliasing, a dot's algorithm,
// a call's is_composite, and the collectives' replica groups in XLA's iota form. Each is read,
// printed, written to the proto under XLA's field and read back; the verifier checks what XLA's
// parser checks of them.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { fingerprint } from "../../ir/fingerprint.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { HloModuleProtoSchema } from "../../ir/proto/gen/hlo_pb.ts";
import { IotaReplicaGroupListProtoSchema } from "../../ir/proto/gen/xla_data_pb.ts";
import { verifyModule } from "../../ir/verify.ts";

const CUSTOM = `HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2,2] parameter(1)
  ROOT c = (f32[2]{0}, f32[2]{0}) custom-call(x, y), custom_call_target="t",
    custom_call_has_side_effect=true, output_to_operand_aliasing={{1}: (0, {})},
    api_version=API_VERSION_TYPED_FFI, operand_layout_constraints={f32[2]{0}, f32[2,2]{0,1}}
}`;

function instr(text: string, name: string) {
  const m = parseHlo(text);
  return [...m.allInstructions()].find((i) => i.name === name)!;
}

describe("custom-call attributes", () => {
  it("are read, printed and round-trip through text and proto", () => {
    const m = parseHlo(CUSTOM);
    verifyModule(m);
    const c = instr(CUSTOM, "c");
    expect(c.attrs.customCallHasSideEffect).toBe(true);
    expect(c.attrs.apiVersion).toBe("API_VERSION_TYPED_FFI");
    expect(c.attrs.outputToOperandAliasing).toEqual([
      { output: [1], operand: 0, operandIndex: [] },
    ]);
    const layouts = c.attrs.operandLayoutConstraints?.map((s) =>
      s.kind === "array" ? s.layout : [],
    );
    expect(layouts).toEqual([[0], [0, 1]]);
    const printed = printHlo(m);
    expect(printed).toContain(
      'custom_call_target="t", custom_call_has_side_effect=true, ' +
        "output_to_operand_aliasing={{1}: (0, {})}, api_version=API_VERSION_TYPED_FFI, " +
        "operand_layout_constraints={f32[2]{0}, f32[2,2]{0,1}}",
    );
    expect(fingerprint(parseHlo(printed))).toBe(fingerprint(m));
    expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
  });

  it("are written under XLA's proto fields", () => {
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(parseHlo(CUSTOM)));
    const c = p.computations[0]!.instructions.find((i) => i.name === "c")!;
    expect(c.customCallHasSideEffect).toBe(true);
    expect(c.customCallApiVersion).toBe(4);
    expect(c.constrainLayout).toBe(true);
    expect(c.operandShapesWithLayout.map((s) => s.layout?.minorToMajor)).toEqual([[0n], [0n, 1n]]);
    expect(c.outputOperandAliasing.map((a) => [a.outputShapeIndex, a.operandIndex])).toEqual([
      [[1n], 0n],
    ]);
  });

  it("API_VERSION_ORIGINAL is the default: written as XLA writes it, read back as none", () => {
    const text = `HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(x), custom_call_target="t", api_version=API_VERSION_ORIGINAL
}`;
    const m = parseHlo(text);
    expect(instr(text, "c").attrs.apiVersion).toBeUndefined();
    expect(printHlo(m)).not.toContain("api_version");
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    expect(p.computations[0]!.instructions.find((i) => i.name === "c")!.customCallApiVersion).toBe(
      1,
    );
    expect(() =>
      parseHlo(text.replace("API_VERSION_ORIGINAL", "API_VERSION_UNSPECIFIED")),
    ).toThrow(/expected a custom-call API version \(API_VERSION_ORIGINAL, /);
  });

  it("the verifier checks the constraints and the aliasing against the operands", () => {
    const few = CUSTOM.replace("{f32[2]{0}, f32[2,2]{0,1}}", "{f32[2]{0}}");
    expect(() => verifyModule(parseHlo(few))).toThrow(
      /operand_layout_constraints has 1 shapes for 2 operands/,
    );
    const wrong = CUSTOM.replace("{f32[2]{0}, f32[2,2]{0,1}}", "{f32[3]{0}, f32[2,2]{0,1}}");
    expect(() => verifyModule(parseHlo(wrong))).toThrow(
      /operand layout constraint 0 f32\[3\] does not fit operand 0/,
    );
    const alias = CUSTOM.replace("{{1}: (0, {})}", "{{1}: (1, {})}");
    expect(() => verifyModule(parseHlo(alias))).toThrow(
      /output_to_operand_aliasing \{1\}: \(1, \{\}\) must name an output and an operand part/,
    );
  });
});

describe("dot algorithm and is_composite", () => {
  const DOT = `HloModule m
sq {
  a = f32[2] parameter(0)
  ROOT m = f32[2] multiply(a, a)
}
ENTRY e {
  x = f32[2,2] parameter(0)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    algorithm=dot_tf32_tf32_f32_x3
  s = f32[2] slice(f32[4] reshape(d)), slice={[0:2]}
  ROOT c = f32[2] call(s), to_apply=sq, is_composite=true
}`;

  it("round-trip through text and proto, under PrecisionConfig.algorithm and is_composite", () => {
    const m = parseHlo(DOT);
    verifyModule(m);
    expect(printHlo(m)).toContain("algorithm=dot_tf32_tf32_f32_x3");
    expect(printHlo(m)).toContain("to_apply=%sq, is_composite=true");
    expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    const byName = new Map(p.computations.flatMap((c) => c.instructions).map((i) => [i.name, i]));
    expect(byName.get("d")!.precisionConfig?.algorithm).toBe(10);
    expect(byName.get("c")!.isComposite).toBe(true);
  });

  it("an unknown algorithm is a parse error listing the known ones", () => {
    expect(() => parseHlo(DOT.replace("dot_tf32_tf32_f32_x3", "dot_fast"))).toThrow(
      /expected a dot algorithm \(dot_any_f8_any_f8_f32, /,
    );
  });
});

describe("replica groups in XLA's iota form", () => {
  const text = (groups: string) => `HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), replica_groups=${groups}, to_apply=add
}`;

  it("reads [G,S]<=[dims]T(perm) as the groups it stands for", () => {
    expect(instr(text("[2,4]<=[8]"), "r").attrs.replicaGroups).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ]);
    expect(instr(text("[4,2]<=[2,4]T(1,0)"), "r").attrs.replicaGroups).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 7],
    ]);
    expect(instr(text("[2,4]<=[2,2,2]T(2,1,0)"), "r").attrs.replicaGroups).toEqual([
      [0, 4, 2, 6],
      [1, 5, 3, 7],
    ]);
    expect(() => parseHlo(text("[2,3]<=[8]"))).toThrow(/need groups\*size = prod\(dims\)/);
  });

  it("reads the iota form XLA writes to the proto (iota_collective_device_list)", () => {
    const m = parseHlo(text("{}"));
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    const r = p.computations.flatMap((c) => c.instructions).find((i) => i.name === "r")!;
    r.replicaGroupList = {
      case: "iotaCollectiveDeviceList",
      value: create(IotaReplicaGroupListProtoSchema, {
        numReplicaGroups: 2n,
        numDevicesPerGroup: 2n,
        iotaReshapeDims: [2n, 2n],
        iotaTransposePerm: [1, 0],
      }),
    };
    const back = moduleFromProto(toBinary(HloModuleProtoSchema, p));
    const rr = [...back.allInstructions()].find((i) => i.name === "r")!;
    expect(rr.attrs.replicaGroups).toEqual([
      [0, 2],
      [1, 3],
    ]);
  });
});

describe("async calls", () => {
  const EXPLICIT = `HloModule m
wrapped {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT m = f32[2] multiply(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  s = ((f32[2], f32[2]), f32[2], s32[]) async-start(x, y), calls=wrapped,
    async_execution_thread="side"
  u = ((f32[2], f32[2]), f32[2], s32[]) async-update(s)
  ROOT d = f32[2] async-done(u)
}`;
  // XLA prints an async-start whose computation is one instruction in this short form.
  const SHORT = `HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  s = ((f32[2], f32[2]), f32[2], s32[]) multiply-start(x, y), async_execution_thread="side"
  u = ((f32[2], f32[2]), f32[2], s32[]) multiply-update(s)
  ROOT d = f32[2] multiply-done(u)
}`;

  it("XLA's short form <op>-start reads as async-start of a one-instruction computation", () => {
    const a = parseHlo(EXPLICIT);
    const b = parseHlo(SHORT);
    verifyModule(b);
    expect(fingerprint(b)).toBe(fingerprint(a));
    const s = [...b.allInstructions()].find((i) => i.name === "s")!;
    expect(s.opcode).toBe("async-start");
    expect(s.attrs.asyncExecutionThread).toBe("side");
    expect(s.called[0]!.root.opcode).toBe("multiply");
  });

  it("round-trips through text and proto", () => {
    const m = parseHlo(EXPLICIT);
    verifyModule(m);
    expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
    expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
  });

  it("the short form of a wrapped op with attributes keeps them on the wrapped op", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  s = ((f32[2,3]), f32[3,2]) transpose-start(x), dimensions={1,0}
  ROOT d = f32[3,2] transpose-done(s)
}`);
    verifyModule(m);
    const s = [...m.allInstructions()].find((i) => i.name === "s")!;
    expect(s.called[0]!.root.attrs.dimensions).toEqual([1, 0]);
    expect(s.attrs.dimensions).toBeUndefined();
  });

  it("copy-start is XLA's own opcode, not the short form of an async copy", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  s = (f32[2], f32[2], u32[]) copy-start(x)
  ROOT d = f32[2] copy-done(s)
}`);
    expect(m.entry.instructions.map((i) => i.opcode)).toEqual(["parameter", "copy-start", "copy-done"]);
    expect(m.computations.length).toBe(1);
  });
});

describe("more of XLA's text forms", () => {
  it("a computation written inline as an attribute (to_apply={ ... })", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  p = f32[4,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}`);
    verifyModule(m);
    expect(m.computations.map((c) => c.name)).toEqual(["inline_computation.0", "e"]);
    expect(printHlo(m)).toContain("to_apply=%inline_computation.0");
    expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
  });

  it("one value for a whole array, and an elided constant {...} (read as zeros)", () => {
    const m = parseHlo(`HloModule m
ENTRY e {
  a = f32[2,3] constant(1.5)
  b = s32[4] constant({...})
  ROOT t = (f32[2,3], s32[4]) tuple(a, b)
}`);
    const [a, b] = [...m.allInstructions()].filter((i) => i.opcode === "constant");
    expect(a!.attrs.literal!.toNumbers()).toEqual([1.5, 1.5, 1.5, 1.5, 1.5, 1.5]);
    expect(b!.attrs.literal!.toNumbers()).toEqual([0, 0, 0, 0]);
    expect(printHlo(m)).toContain("constant({ { 1.5, 1.5, 1.5 }, { 1.5, 1.5, 1.5 } })");
  });

  it("all-gather with a channel_id spans partitions: a multiple of the group size", () => {
    const text = (shape: string) => `HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT g = ${shape} all-gather(x), channel_id=1, replica_groups={{0,1}}, dimensions={0}
}`;
    expect(() => verifyModule(parseHlo(text("f32[8]")))).not.toThrow();
    expect(() => verifyModule(parseHlo(text("f32[6]")))).toThrow(
      /dimension 0 multiplied by a multiple of the group size 2/,
    );
  });
});

describe("sharding metadata", () => {
  const M = `HloModule m
ENTRY e {
  p = f32[4,4] parameter(0), sharding={devices=[2,2]0,1,2,3 metadata={op_name="a" source_line=3}}
  q = f32[4,4] negate(p), sharding={replicated metadata={{op_name="b"}, {op_type="x\\"y"}}}
  ROOT t = (f32[4,4], f32[4,4]) tuple(p, q),
    sharding={{maximal device=1 metadata={op_name="c"}}, {manual}}
}`;

  it("is read, printed as XLA prints it, and written to OpSharding.metadata", () => {
    const m = parseHlo(M);
    const printed = printHlo(m);
    expect(printed).toContain(
      'sharding={devices=[2,2]0,1,2,3 metadata={op_name="a" source_line=3}}',
    );
    expect(printed).toContain(
      'sharding={replicated metadata={{op_name="b"}, {op_type="x\\"y"}}}',
    );
    expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    const q = p.computations[0]!.instructions.find((i) => i.name === "q")!;
    expect(q.sharding!.metadata.map((x) => [x.opName, x.opType])).toEqual([
      ["b", undefined],
      [undefined, 'x"y'],
    ]);
  });

  it("a metadata field Kiln does not keep leaves the sharding as text (no proto form)", () => {
    const m = parseHlo(M.replace('source_line=3', 'profile_type={1}'));
    expect(printHlo(m)).toContain("profile_type={1}");
    expect(() => moduleToProto(m)).toThrow(/has no proto form here/);
  });
});

describe("control-predecessors", () => {
  const M = `HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  a = f32[2] negate(x)
  b = f32[2] exponential(x), control-predecessors={a}
  ROOT t = (f32[2], f32[2]) tuple(a, b)
}`;

  it("are kept, printed, written to control_predecessor_ids and read back", () => {
    const m = parseHlo(M);
    verifyModule(m);
    expect(printHlo(m)).toContain("exponential(f32[2] %x), control-predecessors={%a}");
    expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
    const back = moduleFromProto(moduleToProto(m));
    expect(fingerprint(back)).toBe(fingerprint(m));
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(m));
    const ins = p.computations[0]!.instructions;
    const a = ins.find((i) => i.name === "a")!;
    expect(ins.find((i) => i.name === "b")!.controlPredecessorIds).toEqual([a.id]);
  });

  it("the verifier refuses one that comes later; the parser one that does not exist", () => {
    const later = M.replace(
      "a = f32[2] negate(x)\n  b = f32[2] exponential(x), control-predecessors={a}",
      "a = f32[2] negate(x), control-predecessors={b}\n  b = f32[2] exponential(x)",
    );
    expect(() => verifyModule(parseHlo(later))).toThrow(/control predecessor 'b' comes after it/);
    expect(() => parseHlo(M.replace("={a}", "={zz}"))).toThrow(
      /expected control-predecessors of 'b' to name instructions of 'e', got 'zz'/,
    );
  });

  it("the proto reader refuses a field of XLA's schema it does not read", () => {
    const p = fromBinary(HloModuleProtoSchema, moduleToProto(parseHlo(M)));
    const b = p.computations[0]!.instructions.find((i) => i.name === "b")!;
    // sparsity_config (98), non-empty: XLA's, not Kiln's.
    b.$unknown = [{ no: 98, wireType: 2, data: Uint8Array.of(2, 8, 1) }];
    expect(() => moduleFromProto(toBinary(HloModuleProtoSchema, p))).toThrow(
      /HloInstructionProto sparsity_config is not read by Kiln \(it would be dropped\)/,
    );
    b.$unknown = [{ no: 82, wireType: 2, data: Uint8Array.of(0) }]; // statistics_viz: skipped
    expect(() => moduleFromProto(toBinary(HloModuleProtoSchema, p))).not.toThrow();
  });
});
