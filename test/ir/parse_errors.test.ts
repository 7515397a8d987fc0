// Malformed HLO text: each case must throw a ParseError (and nothing else) at the right line
// and column, with a message that says what was expected there. A property test mutates valid
// modules at random and checks that the parser either accepts the result or throws ParseError.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ParseError } from "../../ir/errors.ts";
import { parseHlo, parseLiteralText, parseShape } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";

/** A module whose entry has parameters %a and %b (f32[2], lines 4 and 5); `body` from line 6. */
const M = (body: string, extra = "") =>
  `HloModule m\n${extra}\nENTRY %main (a: f32[2], b: f32[2]) -> f32[2] {\n` +
  `  %a = f32[2] parameter(0)\n  %b = f32[2] parameter(1)\n${body}\n}\n`;

const ADD = `%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
`;

interface Case {
  name: string;
  text: string;
  /** 1-based line and column of the error. */
  at: [number, number];
  /** A substring of the error's detail. */
  message: string;
}

const CASES: Case[] = [
  {
    name: "empty",
    text: "",
    at: [1, 1],
    message: "expected 'HloModule' or a computation, got end of input",
  },
  {
    name: "onlyComment",
    text: "  // nothing here\n",
    at: [2, 1],
    message: "expected 'HloModule' or a computation, got end of input",
  },
  {
    name: "headerOnlyKeyword",
    text: "HloModule",
    at: [1, 10],
    message: "expected a module name after HloModule, got end of input",
  },
  {
    name: "noComputations",
    text: "HloModule m\n",
    at: [2, 1],
    message: "expected a computation or ENTRY, got end of input",
  },
  {
    name: "truncatedParam",
    text: "HloModule m\nENTRY %e {\n  %a = f32[2] parameter(",
    at: [3, 25],
    message: "expected a parameter number, got end of input",
  },
  {
    name: "truncatedBody",
    text: M("  ROOT %c = f32[2] add(%a, %b)").replace(/\n}\n$/, "\n"),
    at: [7, 1],
    message: "expected '}' to close computation 'main', got end of input",
  },
  {
    name: "truncatedOpcode",
    text: "HloModule m\nENTRY %e {\n  %a = f32[2] parame",
    at: [3, 15],
    message: "expected an opcode, got unknown opcode 'parame'",
  },
  {
    name: "badDim",
    text: M("  ROOT %c = f32[2,x] add(%a, %b)"),
    at: [6, 19],
    message: "expected a dimension size, got 'x'",
  },
  {
    name: "unknownType",
    text: M("  ROOT %c = c64[2] add(%a, %b)"),
    at: [6, 13],
    message:
      "expected an element type (pred, s4, s8, s16, s32, s64, u4, u8, u16, u32, u64, f16, bf16, " +
      "f32, f64, f8e5m2, f8e4m3, f8e3m4, f8e4m3fn, f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz, " +
      "token), got 'c64'",
  },
  {
    name: "unboundedDim",
    text: M("  ROOT %c = f32[?] add(%a, %b)"),
    at: [6, 17],
    message: "(unbounded dynamic dims are not supported), got '?'",
  },
  {
    // A left-out result shape is inferred (as XLA's parser does), except where no rule gives it.
    name: "missingShape",
    text: M("  ROOT %c = reshape(%a)"),
    at: [6, 13],
    message:
      "expected the result shape of reshape 'c' (no rule infers it; XLA infers only the shapes " +
      "of opcodes with one)",
  },
  {
    name: "unknownOpcode",
    text: M("  ROOT %c = f32[2] addd(%a, %b)"),
    at: [6, 20],
    message: "expected an opcode, got unknown opcode 'addd'",
  },
  {
    name: "unknownOperand",
    text: M("  ROOT %c = f32[2] add(%a, %z)"),
    at: [6, 28],
    message: "got 'z' (no instruction of that name in 'main')",
  },
  {
    name: "useBeforeDef",
    text: M("  %c = f32[2] add(%a, %d)\n  ROOT %d = f32[2] negate(%a)"),
    at: [6, 23],
    message: "got 'd' (it is defined later, on line 7)",
  },
  {
    name: "duplicateName",
    text: M("  %a = f32[2] negate(%b)\n  ROOT %c = f32[2] add(%a, %b)"),
    at: [6, 3],
    message: "expected a new instruction name, got 'a' again (first defined on line 4)",
  },
  {
    name: "missingParen",
    text: M("  ROOT %c = f32[2] add(%a, %b"),
    at: [7, 1],
    message: "expected ',' or ')' after an operand, got '}'",
  },
  {
    name: "badIntList",
    text: M("  ROOT %c = f32[2] reverse(%a), dimensions={0,a}"),
    at: [6, 47],
    message: "expected an integer, got 'a'",
  },
  {
    name: "unknownAttr",
    text: M("  ROOT %c = f32[2] add(%a, %b), foo=1"),
    at: [6, 33],
    message:
      "expected an attribute of add (sharding, control-predecessors, frontend_attributes, " +
      "backend_config, metadata), got unknown attribute 'foo'",
  },
  {
    name: "attrWrongOpcode",
    text: M("  ROOT %c = f32[2] add(%a, %b), dimensions={0}"),
    at: [6, 33],
    message: "got 'dimensions', which add does not take",
  },
  {
    name: "duplicateAttr",
    text: M("  ROOT %c = f32[2] reverse(%a), dimensions={0}, dimensions={0}"),
    at: [6, 49],
    message: "expected each attribute once, got 'dimensions' again (first at line 6)",
  },
  {
    name: "missingAttr",
    text: M("  ROOT %c = f32[2] transpose(%a)"),
    at: [6, 33],
    message: "expected attribute 'dimensions=' (required by transpose), got end of line",
  },
  {
    name: "constantCount",
    text: M("  ROOT %c = f32[3] constant({1, 2})"),
    at: [6, 29],
    message: "expected 3 elements in dimension 0 of the f32[3] constant, got 2",
  },
  {
    name: "constantNesting",
    text: M("  ROOT %c = f32[2,2] constant({1, 2, 3, 4})"),
    at: [6, 32],
    message: "expected '{' to open dimension 1 of the f32[2,2] constant, got '1'",
  },
  {
    name: "constantRange",
    text: M("  ROOT %c = u8[] constant(256)"),
    at: [6, 27],
    message: "expected a value that fits u8, got '256' (256 is out of range for u8 [0, 255])",
  },
  {
    name: "constantF32Overflow",
    text: M("  ROOT %c = f32[] constant(1e999)"),
    at: [6, 28],
    message:
      "expected a value that fits f32, got '1e999' (out of range: the largest finite f32 is " +
      "3.4028234663852886e+38; write inf for infinity)",
  },
  {
    // Halfway between f32's max and 2^128 rounds to infinity, so it is out of range.
    name: "constantF32JustOver",
    text: M("  ROOT %c = f32[2] constant({1, 3.4028236e38})"),
    at: [6, 33],
    message: "expected a value that fits f32, got '3.4028236e38' (out of range",
  },
  {
    // 65520 is halfway between f16's max 65504 and 65536: it rounds (to even) to infinity.
    name: "constantF16Overflow",
    text: M("  ROOT %c = f16[] constant(-65520)"),
    at: [6, 28],
    message:
      "expected a value that fits f16, got '-65520' (out of range: the largest finite f16 " +
      "is 65504",
  },
  {
    name: "constantBF16Overflow",
    text: M("  ROOT %c = bf16[] constant(1e100)"),
    at: [6, 29],
    message: "expected a value that fits bf16, got '1e100' (out of range",
  },
  {
    name: "constantFloatForInt",
    text: M("  ROOT %c = s32[] constant(1.5)"),
    at: [6, 28],
    message: "expected an integer (s32 constant), got '1.5'",
  },
  {
    name: "unclosedListEof",
    text: M("  ROOT %c = f32[2] reverse(%a), dimensions={0"),
    at: [8, 1],
    message: "expected '}' to close computation 'main', got end of input",
  },
  {
    name: "unclosedList",
    text: M("  %c = f32[2] reverse(%a), dimensions={0\n  ROOT %d = f32[2] negate(%c)"),
    at: [7, 3],
    message: "expected ',' or '}' in the integer list, got 'ROOT'",
  },
  {
    name: "unclosedHeader",
    text:
      "HloModule m, entry_computation_layout={(f32[2])->f32[2]\n" +
      "ENTRY %e {\n  ROOT %a = f32[] parameter(0)\n}\n",
    at: [5, 1],
    message: "expected '}' to close the one at line 1, column 39, got end of input",
  },
  {
    name: "badNumber",
    text: M("  %p = f32[2] parameter(1x)\n  ROOT %c = f32[2] add(%a, %b)"),
    at: [6, 26],
    message: "expected ')' after the parameter number, got 'x'",
  },
  {
    name: "badFloat",
    text: M("  ROOT %c = f32[] constant(1.2.3)"),
    at: [6, 31],
    message: "expected ')' after the constant's value, got '.3'",
  },
  {
    name: "garbage",
    text: "\u0000\u0001\u00ff garbage",
    at: [1, 1],
    message: "expected 'HloModule' or a computation, got character U+0000",
  },
  {
    name: "garbageMidway",
    text: M("  ROOT %c = f32[2] add(%a, %b) \u00e9"),
    at: [6, 32],
    message: "expected an instruction or '}', got character U+00E9",
  },
  {
    name: "unterminatedComment",
    text: "HloModule m /* never closed\nENTRY",
    at: [2, 6],
    message: "expected '*/' to close the comment, got end of input",
  },
  {
    name: "unterminatedString",
    text: M('  ROOT %c = f32[2] add(%a, %b), metadata={op_name="abc'),
    at: [8, 1],
    message: "expected '\"' to close the string, got end of input",
  },
  {
    name: "twoEntries",
    text:
      "HloModule m\nENTRY %e {\n  ROOT %a = f32[] parameter(0)\n}\n" +
      "ENTRY %f {\n  ROOT %b = f32[] parameter(0)\n}\n",
    at: [5, 1],
    message: "expected one ENTRY computation, got a second (the first is on line 2)",
  },
  {
    name: "twoRoots",
    text: M("  ROOT %c = f32[2] add(%a, %b)\n  ROOT %d = f32[2] add(%a, %b)"),
    at: [7, 3],
    message: "expected one ROOT in computation 'main', got a second (the first is on line 6)",
  },
  {
    name: "unknownComputation",
    text: M(
      "  %z = f32[] constant(0)\n" +
        "  ROOT %c = f32[] reduce(%a, %z), dimensions={0}, to_apply=%nope",
    ),
    at: [7, 60],
    message: "expected the name of a computation in the module, got 'nope'",
  },
  {
    name: "duplicateComputation",
    text:
      ADD +
      ADD.replace(/%x\b/g, "%x1").replace(/%y\b/g, "%y1").replace("%s", "%s1") +
      "ENTRY %e {\n  ROOT %p = f32[] parameter(0)\n}\n",
    at: [6, 1],
    message: "expected a new computation name, got 'add' again (first defined on line 1)",
  },
  {
    name: "wrongArity",
    text: M("  ROOT %c = f32[2] add(%a)"),
    at: [6, 23],
    message: "expected 2 operands for add, got 1",
  },
  {
    name: "operandShape",
    text: M("  ROOT %c = f32[2] add(f32[3] %a, %b)"),
    at: [6, 31],
    message: "expected operand 'a' to have its shape f32[2], got declared shape f32[3]",
  },
  {
    name: "signatureParam",
    text: "HloModule m\nENTRY %e (a: f32[3]) -> f32[2] {\n  ROOT %a = f32[2] parameter(0)\n}\n",
    at: [2, 10],
    message: "expected signature parameter 0 of 'e' to be f32[2] (parameter(0) 'a'), got f32[3]",
  },
  {
    name: "signatureResult",
    text: "HloModule m\nENTRY %e (a: f32[2]) -> s32[2] {\n  ROOT %a = f32[2] parameter(0)\n}\n",
    at: [2, 25],
    message: "expected the result shape of 'e' to be its ROOT's shape f32[2], got s32[2]",
  },
  {
    // Tiles, element size and memory space are kept (test/ir/xla_syntax.test.ts); the layout
    // fields Kiln does not keep are errors naming the field.
    name: "layoutField",
    text: M("  ROOT %c = f32[2]{0:D(C)} add(%a, %b)"),
    at: [6, 22],
    message: "expected a layout field Kiln keeps (T(tiles), E(bits), S(memory space)), got 'D",
  },
  {
    name: "badLayout",
    text: M("  ROOT %c = f32[2]{1} add(%a, %b)"),
    at: [6, 19],
    message: "expected a layout that is a permutation of 0..0, got {1}",
  },
  {
    name: "conditionalMissing",
    text: M(
      "  %p = pred[] constant(true)\n" +
        "  ROOT %c = f32[] conditional(%p, %a, %b), true_computation=%add",
      ADD,
    ),
    at: [12, 19],
    message: "false_computation= for conditional, got only true_computation",
  },
  {
    name: "badEscape",
    text: M('  ROOT %c = f32[2] add(%a, %b), metadata={op_name="a\\qb"}'),
    at: [6, 53],
    message: "expected an escape sequence (\\n, \\t, \\\", \\\\, \\ooo, \\xHH), got '\\'",
  },
  {
    name: "duplicateParam",
    text: M("  %p = f32[2] parameter(1)\n  ROOT %c = f32[2] add(%a, %b)"),
    at: [6, 15],
    message: "expected a new parameter number, got parameter(1) again (first 'b' on line 5)",
  },
  {
    name: "badDimLabels",
    text: M("  ROOT %c = f32[2] convolution(%a, %b), dim_labels=b0f_0io->bx"),
    at: [6, 52],
    message: "got 'b0f_0io->bx' (dim_labels 'b0f_0io->bx': unexpected or repeated 'x' in output)",
  },
  {
    name: "tupleConstant",
    text: M("  ROOT %c = (f32[], f32[]) constant((1, 2))"),
    at: [6, 13],
    message: "got (f32[], f32[]) (tuple constants are not supported)",
  },
  {
    name: "windowMismatch",
    text: M(
      "  %z = f32[] constant(0)\n  ROOT %c = f32[2] reduce-window(%a, %z), " +
        "window={size=2x2 stride=1}, to_apply=%add",
      ADD,
    ),
    at: [12, 60],
    message: "expected 2 values in window 'stride' (as in size), got 1",
  },
  {
    name: "missingEquals",
    text: M("  %c f32[2] add(%a, %b)"),
    at: [6, 6],
    message: "expected '=' after instruction name 'c', got 'f32'",
  },
  {
    name: "negativeParam",
    text: M("  %p = f32[2] parameter(-1)\n  ROOT %c = f32[2] add(%a, %b)"),
    at: [6, 25],
    message: "expected a parameter number, got '-1'",
  },
  {
    name: "emptyBody",
    text: "HloModule m\nENTRY %e {\n}\n",
    at: [3, 1],
    message: "expected an instruction (computation 'e' is empty), got '}'",
  },
  {
    name: "trailingGarbage",
    text: M("  ROOT %c = f32[2] add(%a, %b)") + ")\n",
    at: [8, 1],
    message: "expected a computation or ENTRY, got ')'",
  },
  {
    name: "badDirection",
    text: M("  ROOT %c = pred[2] compare(%a, %b), direction=XX"),
    at: [6, 48],
    message: "expected a comparison direction (EQ, NE, LT, LE, GT, GE), got 'XX'",
  },
  {
    name: "unknownMetadata",
    text: M("  ROOT %c = f32[2] add(%a, %b), metadata={op_kind=\"x\"}"),
    at: [6, 43],
    message: "source_line, source_column), got 'op_kind'",
  },
  {
    name: "hugeConstant",
    text: M("  ROOT %c = f32[100000,100000] constant({1})"),
    at: [6, 41],
    message: "f32[100000,100000] constant, got only 7 characters of text",
  },
  {
    name: "negativeDim",
    text: M("  ROOT %c = f32[-2] add(%a, %b)"),
    at: [6, 17],
    message: "expected a dimension size, got '-2'",
  },
  {
    name: "unclosedTuple",
    text: M("  ROOT %c = (f32[2], f32[2] tuple(%a, %b)"),
    at: [6, 29],
    message: "expected ',' or ')' in the tuple shape, got 'tuple'",
  },

];

function parseError(text: string): ParseError {
  try {
    parseHlo(text);
  } catch (e) {
    if (e instanceof ParseError) return e;
    throw new Error(`expected a ParseError, got ${String(e)}`);
  }
  throw new Error("expected a ParseError, but the text parsed");
}

describe("malformed HLO text", () => {
  it("has at least 30 cases", () => {
    expect(CASES.length).toBeGreaterThanOrEqual(30);
  });

  for (const c of CASES) {
    it(c.name, () => {
      const e = parseError(c.text);
      expect([e.line, e.column]).toEqual(c.at);
      expect(e.detail).toContain(c.message);
      expect(e.detail).toMatch(/^expected /);
      expect(e.message).toContain(`line ${c.at[0]}, column ${c.at[1]}`);
    });
  }

  it("shows the source line with a caret under the column", () => {
    const e = parseError(M("  ROOT %c = f32[2] addd(%a, %b)"));
    expect(e.message).toContain("\n    ROOT %c = f32[2] addd(%a, %b)\n");
    expect(e.message).toContain(`\n  ${" ".repeat(e.column - 1)}^`);
  });

  it("float constants that round to a finite value, and inf/nan spelled out, are accepted", () => {
    const value = (t: string, v: string) =>
      Array.from(parseLiteralText(t as "f32", [], v).data as ArrayLike<number>)[0];
    expect(value("f16", "65519")).toBe(65504);
    expect(value("f16", "-65519.9")).toBe(-65504);
    expect(value("f32", "3.4028235e38")).toBe(3.4028234663852886e38);
    expect(value("bf16", "-65505")).toBe(-65536);
    expect(value("f32", "1e-999")).toBe(0);
    expect(value("f32", "-inf")).toBe(-Infinity);
    expect(value("f16", "inf")).toBe(Infinity);
    expect(value("bf16", "nan")).toBeNaN();
    expect(() => parseLiteralText("f16", [2], "{inf, 65536}")).toThrow(
      /got '65536' \(out of range/,
    );
  });

  it("parseShape and parseLiteralText fail with ParseError too", () => {
    expect(() => parseShape("f32[2")).toThrow(ParseError);
    expect(() => parseShape("f32[2] trailing")).toThrow(/expected the end of the shape/);
    expect(() => parseLiteralText("s32", [2], "{1, 2, 3}")).toThrow(
      /expected 2 elements in dimension 0/,
    );
    expect(() => parseLiteralText("pred", [], "2")).toThrow(ParseError);
  });
});

const VALID = [
  M("  ROOT %c = f32[2] add(f32[2] %a, f32[2] %b), metadata={op_name=\"x\" source_line=3}"),
  `HloModule loop

%cond (s: (s32[], f32[3])) -> pred[] {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[3]{0}) %s), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

%body (t: (s32[], f32[3])) -> (s32[], f32[3]) {
  %t = (s32[], f32[3]{0}) parameter(0)
  %j = s32[] get-tuple-element((s32[], f32[3]{0}) %t), index=0
  %v = f32[3]{0} get-tuple-element((s32[], f32[3]{0}) %t), index=1
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %j, s32[] %one)
  %sl = f32[2]{0} slice(f32[3]{0} %v), slice={[0:3:2]}
  %z = f32[] constant(-1.5e-07)
  %w = f32[3]{0} pad(f32[2]{0} %sl, f32[] %z), padding=0_1
  ROOT %out = (s32[], f32[3]{0}) tuple(s32[] %next, f32[3]{0} %w)
}

ENTRY %main (x: f32[<=3]) -> (s32[], f32[3]) {
  %x = f32[<=3]{0} parameter(0)
  %c = f32[3]{0} constant({1, 2, 3})
  %zero = s32[] constant(0)
  %init = (s32[], f32[3]{0}) tuple(s32[] %zero, f32[3]{0} %c)
  ROOT %loop = (s32[], f32[3]{0}) while((s32[], f32[3]{0}) %init), condition=%cond, body=%body
}
`,
];

/** One random edit: delete, insert or replace a character. */
const arbEdit = fc.record({
  kind: fc.constantFrom("delete", "insert", "replace"),
  at: fc.nat(),
  ch: fc.oneof(
    fc.constantFrom(..."{}()[],=%:<>-_.x\"\\/* \n0123456789abcfsu"),
    fc.string({ minLength: 1, maxLength: 1 }),
  ),
});

function mutate(text: string, edits: { kind: string; at: number; ch: string }[]): string {
  let t = text;
  for (const e of edits) {
    const i = e.at % (t.length + 1);
    if (e.kind === "delete") t = t.slice(0, i) + t.slice(i + 1);
    else if (e.kind === "insert") t = t.slice(0, i) + e.ch + t.slice(i);
    else t = t.slice(0, i) + e.ch + t.slice(i + 1);
  }
  return t;
}

describe("random mutations", () => {
  it("the unmutated texts parse", () => {
    for (const text of VALID) expect(() => parseHlo(text)).not.toThrow();
  });

  for (const [k, text] of VALID.entries()) {
    it(`mutations of valid module ${k} parse or throw ParseError, never anything else`, () => {
      fc.assert(
        fc.property(fc.array(arbEdit, { minLength: 1, maxLength: 3 }), (edits) => {
          const t = mutate(text, edits);
          try {
            // What parses must also print and parse back.
            const printed = printHlo(parseHlo(t));
            expect(printHlo(parseHlo(printed))).toBe(printed);
          } catch (e) {
            if (!(e instanceof ParseError)) throw e;
            expect(e.line).toBeGreaterThanOrEqual(1);
            expect(e.column).toBeGreaterThanOrEqual(1);
            expect(e.detail).toMatch(/^expected /);
          }
        }),
        { numRuns: 1500 },
      );
    });
  }
});
