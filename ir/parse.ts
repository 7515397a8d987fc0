// The HLO text parser: reads XLA's HLO text syntax (what ir/print.ts writes, and what XLA's own
// parser accepts in its tests: names with or without `%`, operands with or without shapes,
// `/* */` and `//` comments, optional signatures, computations in any order, `HloModule`
// header attributes, result shapes left out for the shape rule to infer, nested instructions as
// operands (`add(f32[2] negate(x), y)`, emitted before their user as `negate.anon`), a scalar
// `broadcast(x)` without `dimensions=`) into a Module. It works in two steps: the text is read into a small
// syntax tree (so computations may be called before they are defined), then the Module is built
// with Computation.addInstruction, taking each declared shape as given. As in XLA, an operand
// must be defined before its use and, without an ENTRY keyword, the last computation is the
// entry. A Module's instruction names are module-wide, so a name reused in another computation
// gets a fresh `.N` suffix. XLA attributes that do not change what a program computes here
// (IGNORED_ATTRS: statistics, control-predecessors, ...) are read and dropped; any other unknown
// attribute is an error. Every failure is a ParseError with the line and column and what was
// expected there; the verifier is not run.

import { isSmallFloatType, smallFloatMax } from "./small_floats.ts";
import {
  COMPARISON_DIRECTIONS,
  type Attributes,
  type ComparisonDirection,
  type ComparisonType,
  convDimsFromLabels,
  CUSTOM_CALL_API_VERSIONS,
  type CustomCallApiVersion,
  DOT_ALGORITHMS,
  type DotAlgorithm,
  iotaReplicaGroups,
  type OutputOperandAlias,
  type DotDimensionNumbers,
  type FusionKind,
  type GatherDimensionNumbers,
  type Metadata,
  type PaddingDim,
  RNG_ALGORITHMS,
  RNG_DISTRIBUTIONS,
  type RngAlgorithm,
  type RngDistribution,
  type ScatterDimensionNumbers,
  type SliceDim,
  type WindowDim,
} from "./attributes.ts";
import { ParseError } from "./errors.ts";
import { parseSharding, shardingToString } from "./sharding.ts";
import { DECLARED_SHAPE_OPCODES, inferShape } from "./shape_inference.ts";
import { allocate, Literal, type ScalarValue, toStored } from "./literal.ts";
import { type Computation, type Instruction, Module } from "./module.ts";
import { isOpcode, OPCODE_INFO, type Opcode } from "./opcodes.ts";
import {
  type ArrayShape,
  ELEMENT_TYPES,
  type ElementType,
  isBigIntType,
  isElementType,
  isIntegerType,
  type LayoutDetails,
  MAX_TUPLE_DEPTH,
  type Shape,
  shapeToString,
  tupleShape,
} from "./shape.ts";
import { ATTR_KEYS, type AttrKey, type AttrSlot, slotKey, TEXT_ATTRS } from "./print.ts";

// ---- syntax tree --------------------------------------------------------------------------

interface NameRef {
  name: string;
  pos: number;
}

interface OperandAst extends NameRef {
  /** The shape written before the operand name, if any. */
  shape?: Shape;
}

interface InstrAst extends NameRef {
  isRoot: boolean;
  rootPos: number;
  /** The written result shape; undefined when omitted for the shape rule to infer (as XLA). */
  shape: Shape | undefined;
  shapePos: number;
  /** A nested instruction written as an operand (`add(f32[2] negate(x), y)`): no name given. */
  anonymous?: boolean;
  opcode: Opcode;
  opcodePos: number;
  operands: OperandAst[];
  attrs: Attributes;
  metadata: Metadata;
  /** Called computations in the role order of OPCODE_INFO[opcode].called. */
  called: NameRef[];
  /**
   * XLA's short form of an async-start wrapping one instruction (`x = (...) multiply-start(a,
   * b)`): the wrapped opcode, its attributes and callees; build() makes its computation.
   */
  wrapped?: { opcode: Opcode; attrs: Attributes; called: NameRef[] };
}

/**
 * `<op>-start` / `-update` / `-done` for an opcode that has no such form of its own: XLA's
 * printing of an async-start whose computation is that one instruction. copy-start and
 * copy-done are XLA opcodes of their own (not read here), not this form.
 */
function asyncShortForm(word: string): { base: Opcode; part: Opcode } | undefined {
  const m = /^(.+)-(start|update|done)$/.exec(word);
  if (!m || !isOpcode(m[1]!) || m[1] === "copy") return undefined;
  return { base: m[1], part: `async-${m[2]}` as Opcode };
}

interface SignatureAst {
  pos: number;
  params: Shape[];
  result: Shape;
  resultPos: number;
}

interface CompAst extends NameRef {
  isEntry: boolean;
  signature?: SignatureAst;
  instrs: InstrAst[];
}

interface ModuleAst {
  name?: string;
  comps: CompAst[];
}

/** Attributes as they are read, before they are put together per opcode. */
interface Draft {
  attrs: Attributes;
  metadata: Metadata;
  dot: DotDimensionNumbers;
  gather: GatherDimensionNumbers;
  scatter: ScatterDimensionNumbers;
  indexVectorDim: number;
  refs: Partial<Record<AttrKey, NameRef[]>>;
  seen: Map<string, number>;
}

function newDraft(): Draft {
  return {
    attrs: {},
    metadata: {},
    dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [], rhsContracting: [] },
    gather: {
      offsetDims: [],
      collapsedSliceDims: [],
      startIndexMap: [],
      indexVectorDim: 0,
      operandBatchingDims: [],
      startIndicesBatchingDims: [],
    },
    scatter: {
      updateWindowDims: [],
      insertedWindowDims: [],
      scatterDimsToOperandDims: [],
      indexVectorDim: 0,
      inputBatchingDims: [],
      scatterIndicesBatchingDims: [],
    },
    indexVectorDim: 0,
    refs: {},
    seen: new Map(),
  };
}

/** XLA attributes that Kiln reads and drops: they do not change what a program computes here. */
const IGNORED_ATTRS: ReadonlySet<string> = new Set([
  "statistics",
  "parameter_replication",
  "origin",
  "operand_precision",
  "result_accuracy",
]);

/** XLA OpMetadata fields that Kiln's Metadata does not keep. */
const IGNORED_METADATA: ReadonlySet<string> = new Set([
  "source_end_line",
  "source_end_column",
  "profile_type",
  "deduplicated_name",
  "preserve_layout",
  "scheduling_name",
  "stack_frame_id",
]);

const ATTR_KEY_SET: ReadonlySet<string> = new Set(ATTR_KEYS);
const GLOBAL_ATTRS: readonly AttrKey[] = [
  "sharding",
  "control-predecessors",
  "frontend_attributes",
  "backend_config",
  "metadata",
];
const COMPARISON_TYPES: readonly ComparisonType[] = ["FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"];
const FUSION_KINDS: readonly FusionKind[] = ["kLoop", "kInput", "kOutput", "kCustom"];
/** The largest finite value of each float type, for the out-of-range message. */
const FLOAT_MAX = {
  f32: 3.4028234663852886e38,
  f16: 65504,
  bf16: 3.3895313892515355e38,
  f64: Number.MAX_VALUE,
};

function largestFinite(t: ElementType): number {
  return isSmallFloatType(t) ? smallFloatMax(t) : FLOAT_MAX[t as keyof typeof FLOAT_MAX];
}

/** The most elements a literal written as one value (or `{...}`) is filled out to. */
const MAX_FILLED_ELEMENTS = 1 << 24;

const RE_NAME = /[A-Za-z_][A-Za-z0-9_.-]*/y;
const RE_PERCENT_NAME = /%[A-Za-z0-9_.-]+/y;
const RE_INT = /[-+]?[0-9]+/y;
const RE_FLOAT = /[-+]?(?:inf|nan|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)/y;
const RE_TYPE = /[a-z][a-z0-9]*/y;
const RE_OPCODE = /[a-z][a-z0-9-]*/y;
const RE_ATTR = /[A-Za-z_][A-Za-z0-9_-]*/y;
const RE_WORD = /[A-Za-z0-9_.%-]+/y;

/** C escapes: the byte each stands for. */
const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  n: 10,
  t: 9,
  r: 13,
  '"': 34,
  "'": 39,
  "\\": 92,
  "?": 63,
  a: 7,
  b: 8,
  f: 12,
  v: 11,
};

function match(re: RegExp, text: string, pos: number): string | undefined {
  re.lastIndex = pos;
  const m = re.exec(text);
  return m ? m[0] : undefined;
}

// ---- the reader ---------------------------------------------------------------------------

class Parser {
  pos = 0;
  private readonly lineStarts: number[] = [0];

  constructor(readonly text: string) {
    for (let i = 0; i < text.length; i++) if (text[i] === "\n") this.lineStarts.push(i + 1);
  }

  // -- positions and errors --

  lineCol(pos: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= pos) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: pos - this.lineStarts[lo]! + 1 };
  }

  lineOf(pos: number): number {
    return this.lineCol(pos).line;
  }

  error(pos: number, detail: string): ParseError {
    const at = Math.min(Math.max(pos, 0), this.text.length);
    const { line, column } = this.lineCol(at);
    const start = this.lineStarts[line - 1]!;
    const nl = this.text.indexOf("\n", start);
    const src = this.text.slice(start, nl < 0 ? this.text.length : nl).replace(/\r$/, "");
    return new ParseError(line, column, detail, src);
  }

  /** What the text holds at `pos`, for "got ..." in messages. */
  describe(pos: number): string {
    let p = pos;
    while (this.text[p] === " " || this.text[p] === "\t") p++;
    if (p >= this.text.length) return "end of input";
    const c = this.text[p]!;
    if (c === "\n" || c === "\r") return "end of line";
    if (this.text.startsWith("->", p)) return "'->'";
    const w = match(RE_WORD, this.text, p);
    if (w !== undefined) return `'${w.length > 32 ? `${w.slice(0, 32)}...` : w}'`;
    const code = c.codePointAt(0)!;
    if (code >= 0x20 && code < 0x7f) return `'${c}'`;
    return `character U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  }

  /** Throws "expected X, got Y" at the current position (after whitespace). */
  fail(expected: string): never {
    this.ws();
    throw this.error(this.pos, `expected ${expected}, got ${this.describe(this.pos)}`);
  }

  failAt(pos: number, expected: string): never {
    throw this.error(pos, `expected ${expected}, got ${this.describe(pos)}`);
  }

  // -- tokens --

  /** Skips whitespace and comments. */
  ws(): void {
    const t = this.text;
    for (;;) {
      const c = t.charCodeAt(this.pos);
      if (c === 32 || c === 9 || c === 10 || c === 13) {
        this.pos++;
      } else if (c === 47 && t.charCodeAt(this.pos + 1) === 42) {
        const end = t.indexOf("*/", this.pos + 2);
        if (end < 0) {
          throw this.error(t.length, "expected '*/' to close the comment, got end of input");
        }
        this.pos = end + 2;
      } else if (c === 47 && t.charCodeAt(this.pos + 1) === 47) {
        const end = t.indexOf("\n", this.pos);
        this.pos = end < 0 ? t.length : end;
      } else {
        return;
      }
    }
  }

  atEnd(): boolean {
    this.ws();
    return this.pos >= this.text.length;
  }

  peek(): string {
    this.ws();
    return this.text[this.pos] ?? "";
  }

  eat(s: string): boolean {
    this.ws();
    if (!this.text.startsWith(s, this.pos)) return false;
    this.pos += s.length;
    return true;
  }

  expect(s: string, context = ""): void {
    if (!this.eat(s)) this.fail(`'${s}'${context ? ` ${context}` : ""}`);
  }

  eatKeyword(word: string): boolean {
    this.ws();
    if (!this.text.startsWith(word, this.pos)) return false;
    if (/[A-Za-z0-9_.%-]/.test(this.text[this.pos + word.length] ?? "")) return false;
    this.pos += word.length;
    return true;
  }

  /** A name with or without `%` (the `%` is dropped). */
  name(what: string): NameRef {
    this.ws();
    const pos = this.pos;
    let raw = match(RE_PERCENT_NAME, this.text, pos) ?? match(RE_NAME, this.text, pos);
    if (raw === undefined) this.fail(what);
    // `%a->` : the arrow is not part of the name.
    if (raw.endsWith("-") && this.text[pos + raw.length] === ">") raw = raw.slice(0, -1);
    const name = raw.startsWith("%") ? raw.slice(1) : raw;
    if (name === "") this.fail(what);
    this.pos = pos + raw.length;
    return { name, pos };
  }

  int(what = "an integer"): number {
    this.ws();
    const s = match(RE_INT, this.text, this.pos);
    if (s === undefined) this.fail(what);
    const v = Number(s);
    if (!Number.isSafeInteger(v)) {
      throw this.error(this.pos, `expected ${what} of at most 2^53, got '${s}'`);
    }
    this.pos += s.length;
    return v;
  }

  natural(what = "a non-negative integer"): number {
    this.ws();
    const at = this.pos;
    const v = this.int(what);
    if (v < 0) this.failAt(at, what);
    return v;
  }

  /** `{1,2,3}` or `{}`. */
  intList(what = "a list of integers like {0,1}"): number[] {
    this.ws();
    if (this.text[this.pos] !== "{") this.fail(what);
    this.pos++;
    const out: number[] = [];
    if (this.eat("}")) return out;
    for (;;) {
      out.push(this.int());
      if (this.eat(",")) continue;
      if (this.eat("}")) return out;
      this.fail("',' or '}' in the integer list");
    }
  }

  /**
   * Replica groups: `{{0,1},{2,3}}`, or XLA's iota form `[G,S]<=[dims]` / `[G,S]<=[dims]T(perm)`
   * (iota over prod(dims) ids, reshaped to dims, transposed by perm, cut into G groups of S),
   * which is read as the groups it stands for.
   */
  groups(what: string): number[][] {
    this.ws();
    if (this.text[this.pos] === "[") return this.iotaGroups(what);
    this.expect("{", `to open ${what}`);
    const out: number[][] = [];
    if (this.eat("}")) return out;
    for (;;) {
      out.push(this.intList(`a group like {0,1} in ${what}`));
      if (this.eat(",")) continue;
      if (this.eat("}")) return out;
      this.fail(`',' or '}' in ${what}`);
    }
  }

  private bracketList(): number[] {
    this.expect("[");
    const out: number[] = [];
    if (this.eat("]")) return out;
    for (;;) {
      out.push(this.natural());
      if (this.eat(",")) continue;
      if (this.eat("]")) return out;
      this.fail("',' or ']' in the list");
    }
  }

  private iotaGroups(what: string): number[][] {
    const at = this.pos;
    const shape = this.bracketList();
    this.expect("<=", `in the iota form of ${what} ([groups,size]<=[dims])`);
    const dims = this.bracketList();
    let perm = dims.map((_, i) => i);
    if (this.eatKeyword("T")) {
      this.expect("(", "to open the transpose of the iota groups");
      perm = [];
      if (!this.eat(")")) {
        for (;;) {
          perm.push(this.natural());
          if (this.eat(",")) continue;
          if (this.eat(")")) break;
          this.fail("',' or ')' in the transpose");
        }
      }
    }
    if (shape.length !== 2) {
      throw this.error(
        at,
        `expected ${what} in the iota form [groups,size]<=[dims], got [${shape}]`,
      );
    }
    try {
      return iotaReplicaGroups(shape[0]!, shape[1]!, dims, perm);
    } catch (e) {
      throw this.error(at, `expected ${what} in a valid iota form: ${message(e)}`);
    }
  }

  /** `{{}: (0, {}), {1}: (2, {0})}`: output shape index -> (operand, operand shape index). */
  aliasing(): OutputOperandAlias[] {
    this.expect("{", "to open output_to_operand_aliasing");
    const out: OutputOperandAlias[] = [];
    if (this.eat("}")) return out;
    for (;;) {
      const output = this.intList("an output shape index like {0}");
      this.expect(":", "after the output shape index");
      this.expect("(", "to open (operand, shape index)");
      const operand = this.natural("an operand number");
      this.expect(",", "after the operand number");
      const operandIndex = this.intList("an operand shape index like {}");
      this.expect(")", "to close (operand, shape index)");
      out.push({ output, operand, operandIndex });
      if (this.eat(",")) continue;
      if (this.eat("}")) return out;
      this.fail("',' or '}' in output_to_operand_aliasing");
    }
  }

  bool(): boolean {
    if (this.eatKeyword("true")) return true;
    if (this.eatKeyword("false")) return false;
    return this.fail("true or false");
  }

  /** One of `words` (an identifier-like token). */
  oneOf<T extends string>(words: readonly T[], what: string): T {
    this.ws();
    const w = match(RE_ATTR, this.text, this.pos);
    const hit = words.find((x) => x === w);
    if (hit === undefined) this.fail(`${what} (${words.join(", ")})`);
    this.pos += hit.length;
    return hit;
  }

  /** A double-quoted string with C escapes (escaped bytes are read as UTF-8, as XLA writes). */
  string(): string {
    this.ws();
    const open = this.pos;
    if (this.text[open] !== '"') this.fail("a string in double quotes");
    const parts: string[] = [];
    let bytes: number[] = [];
    const flushBytes = () => {
      if (bytes.length > 0) parts.push(new TextDecoder().decode(new Uint8Array(bytes)));
      bytes = [];
    };
    let i = open + 1;
    let quote = -1;
    let slash = -1;
    for (;;) {
      // Both searches are cached until passed, so long strings stay linear.
      if (quote < i) quote = this.text.indexOf('"', i);
      if (slash < i && slash !== -2) slash = this.text.indexOf("\\", i);
      if (slash === -1) slash = -2;
      if (quote < 0) {
        throw this.error(this.text.length, "expected '\"' to close the string, got end of input");
      }
      if (slash === -2 || quote < slash) {
        flushBytes();
        parts.push(this.text.slice(i, quote));
        this.pos = quote + 1;
        return parts.join("");
      }
      if (slash > i) {
        flushBytes();
        parts.push(this.text.slice(i, slash));
      }
      const e = this.text[slash + 1] ?? "";
      const simple = SIMPLE_ESCAPES[e];
      if (simple !== undefined) {
        bytes.push(simple);
        i = slash + 2;
      } else if (/[0-7]/.test(e)) {
        const oct = match(/[0-7]{1,3}/y, this.text, slash + 1)!;
        bytes.push(parseInt(oct, 8) & 0xff);
        i = slash + 1 + oct.length;
      } else if (e === "x" && /[0-9a-fA-F]/.test(this.text[slash + 2] ?? "")) {
        const hex = match(/[0-9a-fA-F]{1,2}/y, this.text, slash + 2)!;
        bytes.push(parseInt(hex, 16));
        i = slash + 2 + hex.length;
      } else {
        this.failAt(slash, "an escape sequence (\\n, \\t, \\\", \\\\, \\ooo, \\xHH)");
      }
    }
  }

  /** Skips one attribute value: a balanced {...}/(...)/[...], a string, or a word. */
  /** `{key="value", key2={braced text}}`: frontend attributes, sorted by key. */
  frontendAttributes(): [string, string][] {
    this.expect("{", "to open frontend_attributes");
    const out = new Map<string, string>();
    if (!this.eat("}")) {
      for (;;) {
        this.ws();
        const keyPos = this.pos;
        const key = match(/[A-Za-z0-9_.-]+/y, this.text, keyPos);
        if (key === undefined) this.fail("a frontend attribute name");
        this.pos += key.length;
        this.expect("=", `after frontend attribute '${key}'`);
        this.ws();
        const value = this.text[this.pos] === "{" ? this.skipBalanced() : this.string();
        if (out.has(key)) {
          throw this.error(keyPos, `expected each frontend attribute once, got '${key}' again`);
        }
        out.set(key, value);
        if (this.eat(",")) continue;
        this.expect("}", "to close frontend_attributes");
        break;
      }
    }
    return [...out].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }

  skipValue(): void {
    this.ws();
    const open = this.text[this.pos] ?? "";
    if (open === '"') {
      this.string();
      return;
    }
    if (open === "{" || open === "(" || open === "[") {
      this.skipBalanced();
      return;
    }
    const w = match(/[^\s,{}()[\]]+/y, this.text, this.pos);
    if (w === undefined) this.fail("an attribute value");
    this.pos += w.length;
  }

  /** Skips from an opening bracket to its matching close; returns the skipped text. */
  skipBalanced(): string {
    const start = this.pos;
    const closers: { ch: string; pos: number }[] = [];
    const pairs: Record<string, string> = { "{": "}", "(": ")", "[": "]" };
    while (this.pos < this.text.length) {
      const c = this.text[this.pos]!;
      if (c === '"') {
        this.string();
        continue;
      }
      if (pairs[c] !== undefined) {
        closers.push({ ch: pairs[c], pos: this.pos });
      } else if (c === "}" || c === ")" || c === "]") {
        const top = closers.pop();
        if (!top || top.ch !== c) {
          this.failAt(this.pos, top ? `'${top.ch}'` : "a balanced value");
        }
        if (closers.length === 0) {
          this.pos++;
          return this.text.slice(start, this.pos);
        }
      }
      this.pos++;
    }
    const top = closers[closers.length - 1]!;
    const { line, column } = this.lineCol(top.pos);
    throw this.error(
      this.text.length,
      `expected '${top.ch}' to close the one at line ${line}, column ${column}, got end of input`,
    );
  }

  // -- shapes --

  /** True when a shape starts here: `(` or an element type directly followed by `[`. */
  atShape(): boolean {
    this.ws();
    if (this.text[this.pos] === "(") return true;
    const t = match(RE_TYPE, this.text, this.pos);
    return t !== undefined && this.text[this.pos + t.length] === "[";
  }

  shape(depth = 0): Shape {
    this.ws();
    const start = this.pos;
    if (this.text[start] === "(") {
      if (depth >= MAX_TUPLE_DEPTH) {
        throw this.error(
          start,
          `expected a shape, got tuples nested deeper than ${MAX_TUPLE_DEPTH} ` +
            `(the limit on tuple nesting)`,
        );
      }
      this.pos++;
      const elements: Shape[] = [];
      if (this.eat(")")) return tupleShape(elements);
      for (;;) {
        elements.push(this.shape(depth + 1));
        if (this.eat(",")) continue;
        if (this.eat(")")) return tupleShape(elements);
        this.fail("',' or ')' in the tuple shape");
      }
    }
    const t = match(RE_TYPE, this.text, start);
    if (t === undefined || this.text[start + t.length] !== "[") {
      this.fail("a shape like f32[2,3]");
    }
    if (!isElementType(t)) {
      throw this.error(
        start,
        `expected an element type (${ELEMENT_TYPES.join(", ")}), got '${t}'`,
      );
    }
    this.pos = start + t.length + 1;
    const dims: number[] = [];
    const dynamic: boolean[] = [];
    if (!this.eat("]")) {
      for (;;) {
        this.ws();
        if (this.text[this.pos] === "?") {
          this.failAt(
            this.pos,
            "a size or a bound '<=N' (unbounded dynamic dims are not supported)",
          );
        }
        const isDyn = this.eat("<=");
        dims.push(this.natural("a dimension size"));
        dynamic.push(isDyn);
        if (this.eat(",")) continue;
        if (this.eat("]")) break;
        this.fail("',' or ']' in the shape's dimensions");
      }
    }
    const parsed = this.layout(dims.length);
    if (!parsed) return { kind: "array", type: t, dims, dynamic };
    const { order: layout, details } = parsed;
    return details
      ? { kind: "array", type: t, dims, dynamic, layout, layoutDetails: details }
      : { kind: "array", type: t, dims, dynamic, layout };
  }

  /** A layout's details after the `:`: tiles `T(8,128)(2,1)`, `E(bits)`, `S(memory space)`. */
  private layoutDetails(): LayoutDetails {
    const tiles: number[][] = [];
    let elementSizeInBits: number | undefined;
    let memorySpace: number | undefined;
    for (;;) {
      this.ws();
      const at = this.pos;
      const c = this.text[at];
      if (c === "}") break;
      const one = (what: string): number => {
        this.pos++;
        this.expect("(", `after ${c} in the layout`);
        const v = this.natural(what);
        this.expect(")", `after the layout's ${what}`);
        return v;
      };
      if (c === "T") {
        this.pos++;
        if (this.text[this.pos] !== "(") this.fail("'(' after T in the layout");
        while (this.text[this.pos] === "(") {
          this.pos++;
          const tile: number[] = [];
          for (;;) {
            this.ws();
            if (this.text[this.pos] === "*") {
              throw this.error(
                this.pos,
                "expected a tile size, got '*' (combined tile dims are not supported)",
              );
            }
            tile.push(this.natural("a tile size"));
            if (this.eat(",")) continue;
            this.expect(")", "to end the tile");
            break;
          }
          tiles.push(tile);
        }
      } else if (c === "E") {
        elementSizeInBits = one("element size in bits");
      } else if (c === "S") {
        memorySpace = one("memory space");
      } else {
        throw this.error(
          at,
          `expected a layout field Kiln keeps (T(tiles), E(bits), S(memory space)), got ` +
            this.describe(at),
        );
      }
    }
    return {
      ...(tiles.length > 0 ? { tiles } : {}),
      ...(elementSizeInBits !== undefined ? { elementSizeInBits } : {}),
      ...(memorySpace !== undefined ? { memorySpace } : {}),
    };
  }

  /** `{1,0}` or `{1,0:T(8,128)S(1)}` after a shape's dims, when present. */
  private layout(rank: number): { order: number[]; details?: LayoutDetails } | undefined {
    const save = this.pos;
    this.ws();
    if (this.text[this.pos] !== "{") {
      this.pos = save;
      return undefined;
    }
    const open = this.pos;
    this.pos++;
    this.ws();
    const next = this.text[this.pos] ?? "";
    if (!/[0-9}:]/.test(next)) {
      // Not a layout: the `{` opens something else (a computation body).
      this.pos = save;
      return undefined;
    }
    const order: number[] = [];
    let details: LayoutDetails | undefined;
    if (!this.eat("}")) {
      for (;;) {
        if (this.peek() === ":") break;
        order.push(this.natural("a dimension number in the layout"));
        if (this.eat(",")) continue;
        break;
      }
      this.ws();
      if (this.text[this.pos] === ":") {
        this.pos++;
        details = this.layoutDetails();
      }
      this.expect("}", "to end the layout");
    }
    const sorted = [...order].sort((a, b) => a - b);
    if (order.length !== rank || sorted.some((d, i) => d !== i)) {
      const want = rank === 0 ? "{}" : `a permutation of 0..${rank - 1}`;
      throw this.error(open, `expected a layout that is ${want}, got {${order.join(",")}}`);
    }
    return details && Object.keys(details).length > 0 ? { order, details } : { order };
  }

  // -- literals --

  /** The bits of the NaN just read, for a constant to store exactly (sign and payload). */
  private nanBits: bigint | undefined;

  /**
   * XLA's `nan`, `-nan` and `nan(0x7f)`: the sign and, for f32 and f64, the payload (the
   * mantissa; plain `nan` is the quiet NaN). As f32 bits for f16/bf16 (their storage), which
   * keep the sign; a payload there is refused rather than changed.
   */
  private nanPattern(type: ElementType, neg: boolean, start: number): bigint {
    let payload: bigint | undefined;
    if (this.text[this.pos] === "(") {
      const m = /\(0x([0-9a-fA-F]+)\)/y;
      m.lastIndex = this.pos;
      const hit = m.exec(this.text);
      if (!hit) this.fail("a NaN payload like nan(0x7f)");
      payload = BigInt(`0x${hit[1]}`);
      this.pos += hit[0].length;
    }
    const f64 = type === "f64";
    if (payload !== undefined && type !== "f32" && !f64) {
      throw this.error(
        start,
        `expected a NaN without a payload for ${type} (Kiln keeps f32 and f64 payloads)`,
      );
    }
    const mantissaBits = f64 ? 52n : 23n;
    const quiet = 1n << (mantissaBits - 1n);
    const p = payload ?? quiet;
    if (p === 0n || p >= 1n << mantissaBits) {
      throw this.error(
        start,
        `expected a NaN payload in [1, 2^${mantissaBits}), got 0x${p.toString(16)}`,
      );
    }
    const exponent = f64 ? 0x7ffn << 52n : 0xffn << 23n;
    const sign = neg ? 1n << (f64 ? 63n : 31n) : 0n;
    return sign | exponent | p;
  }

  literal(shape: ArrayShape): Literal {
    const n = shape.dims.reduce((a, b) => a * b, 1);
    this.ws();
    if (n > MAX_FILLED_ELEMENTS && !this.text.startsWith("{", this.pos)) {
      throw this.error(
        this.pos,
        `expected a constant Kiln can hold: ${shapeToString(shape, false)} has ${n} elements, ` +
          `more than the ${MAX_FILLED_ELEMENTS} a literal written as one value may fill`,
      );
    }
    if (shape.dims.length > 0 && this.text.startsWith("{...}", this.pos)) {
      // XLA's elided constant (its printer leaves large ones out): the values are unspecified
      // (XLA's parser fills arbitrary ones); Kiln reads zeros.
      this.pos += 5;
      return new Literal(shape.type, shape.dims, allocate(shape.type, n));
    }
    if (shape.dims.length > 0 && this.text[this.pos] !== "{") {
      // XLA reads one value for a whole array (`f32[9] constant(0)`): every element is it.
      const data = allocate(shape.type, n);
      this.nanBits = undefined;
      const v = this.scalar(shape.type);
      if (this.nanBits !== undefined) {
        throw this.error(this.pos, "expected a NaN without a payload for a whole-array constant");
      }
      (data as unknown as { fill(x: number | bigint): void }).fill(v);
      return new Literal(shape.type, shape.dims, data);
    }
    const left = this.text.length - this.pos;
    if (n > left) {
      // Each element takes at least one character: fail before allocating storage.
      throw this.error(
        this.pos,
        `expected ${n} elements for the ${shapeToString(shape, false)} constant, ` +
          `got only ${left} characters of text`,
      );
    }
    const data = allocate(shape.type, n);
    const store = data as unknown as (number | bigint)[];
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    let index = 0;
    const put = () => {
      this.nanBits = undefined;
      const v = this.scalar(shape.type);
      if (index < n) {
        if (this.nanBits === undefined) store[index] = v;
        else if (shape.type === "f64") view.setBigUint64(index * 8, this.nanBits, true);
        else view.setUint32(index * 4, Number(this.nanBits), true);
      }
      index++;
    };
    const rank = shape.dims.length;
    const level = (dim: number) => {
      this.ws();
      const open = this.pos;
      if (this.text[open] !== "{") {
        this.fail(`'{' to open dimension ${dim} of the ${shapeToString(shape, false)} constant`);
      }
      this.pos++;
      let count = 0;
      if (!this.eat("}")) {
        for (;;) {
          if (dim === rank - 1) put();
          else level(dim + 1);
          count++;
          if (this.eat(",")) continue;
          if (this.eat("}")) break;
          this.fail("',' or '}' in the constant");
        }
      }
      if (count !== shape.dims[dim]) {
        throw this.error(
          open,
          `expected ${shape.dims[dim]} elements in dimension ${dim} of the ` +
            `${shapeToString(shape, false)} constant, got ${count}`,
        );
      }
    };
    if (rank === 0) put();
    else level(0);
    return new Literal(shape.type, shape.dims, data);
  }

  /** One element of a literal, converted to its stored form. */
  scalar(type: ElementType): number | bigint {
    this.ws();
    const start = this.pos;
    let value: ScalarValue;
    let token: string;
    if (type === "pred") {
      if (this.eatKeyword("true")) return 1;
      if (this.eatKeyword("false")) return 0;
      const s = match(RE_INT, this.text, start);
      if (s !== "0" && s !== "1") this.fail("a pred value (true or false)");
      this.pos += 1;
      return Number(s);
    }
    if (isIntegerType(type)) {
      const s = match(RE_INT, this.text, start);
      const f = match(RE_FLOAT, this.text, start);
      if (s === undefined || (f !== undefined && f.length > s.length)) {
        this.fail(`an integer (${type} constant)`);
      }
      token = s;
      value = isBigIntType(type) ? BigInt(s) : Number(s);
    } else {
      const f = match(RE_FLOAT, this.text, start);
      if (f === undefined) this.fail(`a number (${type} constant)`);
      token = f;
      const body = f.replace(/^[-+]/, "");
      const neg = f.startsWith("-");
      if (body === "nan") {
        this.pos = start + token.length;
        this.nanBits = this.nanPattern(type, neg, start);
        return NaN;
      }
      if (body === "inf") {
        this.pos = start + token.length;
        return toStored(type, neg ? -Infinity : Infinity);
      }
      value = Number(f);
    }
    let v: number | bigint;
    try {
      v = toStored(type, value);
    } catch (e) {
      throw this.error(start, `expected a value that fits ${type}, got '${token}' (${message(e)})`);
    }
    // As XLA's parser: a finite number is rounded to the type (so 65519 is f16's 65504), and
    // one that rounds to infinity is out of range; only `inf` and `nan` spell non-finite values.
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw this.error(
        start,
        `expected a value that fits ${type}, got '${token}' (out of range: the largest finite ` +
          `${type} is ${largestFinite(type)}; write inf for infinity)`,
      );
    }
    this.pos = start + token.length;
    return v;
  }

  // -- attributes --

  /** `, key=value` pairs after an instruction's operands. */
  attributes(opcode: Opcode, d: Draft, extra: readonly AttrKey[] = []): void {
    const slots: readonly AttrSlot[] = TEXT_ATTRS[opcode];
    const allowed = new Set<string>([
      ...slots.map((s) => slotKey(s).key),
      ...GLOBAL_ATTRS,
      ...extra,
    ]);
    let end = this.pos;
    while (this.eat(",")) {
      this.ws();
      const keyPos = this.pos;
      const key = match(RE_ATTR, this.text, keyPos);
      if (key === undefined) this.fail("an attribute name");
      this.pos += key.length;
      this.expect("=", `after attribute '${key}'`);
      if (IGNORED_ATTRS.has(key)) {
        this.skipValue();
        end = this.pos;
        continue;
      }
      if (!allowed.has(key)) {
        const list = [...allowed].join(", ");
        const what = ATTR_KEY_SET.has(key)
          ? `'${key}', which ${opcode} does not take`
          : `unknown attribute '${key}'`;
        throw this.error(keyPos, `expected an attribute of ${opcode} (${list}), got ${what}`);
      }
      const first = d.seen.get(key);
      if (first !== undefined) {
        throw this.error(
          keyPos,
          `expected each attribute once, got '${key}' again (first at line ${this.lineOf(first)})`,
        );
      }
      d.seen.set(key, keyPos);
      ATTR_PARSERS[key as AttrKey](this, d);
      end = this.pos;
    }
    for (const slot of slots) {
      const { key, optional } = slotKey(slot);
      if (opcode === "broadcast" && key === "dimensions" && !d.seen.has(key)) {
        // XLA reads `broadcast(x)` without dimensions= as a broadcast of a scalar (no operand
        // dims to map); the verifier rejects it for an operand that is not a scalar.
        d.attrs.dimensions = [];
        continue;
      }
      if (!optional && !d.seen.has(key)) {
        this.failAt(end, `attribute '${key}=' (required by ${opcode})`);
      }
    }
  }

  /**
   * A computation by name, or written inline (`to_apply={ a = f32[] parameter(0) ... }`, which
   * XLA reads too): an inline body becomes a computation of the module named
   * `inline_computation.N`.
   */
  computationRef(): NameRef {
    this.ws();
    if (this.text[this.pos] !== "{") return this.name("a computation name");
    const pos = this.pos;
    this.pos++;
    const name = `inline_computation.${this.inlineComps.length}`;
    const outer = this.nested;
    this.nested = [];
    const instrs = this.computationBody(name);
    this.nested = outer;
    this.inlineComps.push({ name, pos, isEntry: false, instrs });
    return { name, pos };
  }

  /** `{a, b, ...}`: computations by name (or inline), for the attribute `attr`. */
  computationRefList(attr: string): NameRef[] {
    this.expect("{", `to open ${attr}`);
    const refs: NameRef[] = [];
    if (this.eat("}")) return refs;
    for (;;) {
      refs.push(this.computationRef());
      if (this.eat(",")) continue;
      if (this.eat("}")) return refs;
      this.fail(`',' or '}' in ${attr}`);
    }
  }

  slice(): SliceDim[] {
    this.expect("{", "to open the slice");
    const out: SliceDim[] = [];
    if (this.eat("}")) return out;
    for (;;) {
      this.expect("[", "to open a slice dimension like [0:2]");
      const start = this.int();
      this.expect(":", "in the slice dimension");
      const limit = this.int();
      const stride = this.eat(":") ? this.int() : 1;
      this.expect("]", "to close the slice dimension");
      out.push({ start, limit, stride });
      if (this.eat(",")) continue;
      if (this.eat("}")) return out;
      this.fail("',' or '}' in the slice");
    }
  }

  /** `lo_hi[_interior]` per dim, joined by `x`; empty for a rank-0 pad. */
  padding(): PaddingDim[] {
    this.ws();
    const out: PaddingDim[] = [];
    if (!/[-+0-9]/.test(this.text[this.pos] ?? "")) return out;
    for (;;) {
      const low = this.int();
      this.expect("_", "between low and high padding (like 0_1)");
      const high = this.int();
      const interior = this.text[this.pos] === "_" ? (this.pos++, this.int()) : 0;
      out.push({ low, high, interior });
      if (this.text[this.pos] !== "x") return out;
      this.pos++;
    }
  }

  /** Integers joined by `x` (`3x3`). */
  private xList(): number[] {
    const out = [this.int()];
    while (this.text[this.pos] === "x") {
      this.pos++;
      out.push(this.int());
    }
    return out;
  }

  window(): WindowDim[] {
    this.ws();
    const open = this.pos;
    this.expect("{", "to open the window");
    const parts = new Map<string, { pos: number; values: number[][] }>();
    const keys = ["size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"];
    while (!this.eat("}")) {
      this.ws();
      const pos = this.pos;
      const key = this.oneOf(keys, "a window field");
      if (parts.has(key)) {
        throw this.error(pos, `expected each window field once, got '${key}' again`);
      }
      this.expect("=", `after '${key}'`);
      let values: number[][];
      if (key === "pad") {
        values = [];
        for (;;) {
          const lo = this.int();
          this.expect("_", "between low and high window padding (like 1_1)");
          values.push([lo, this.int()]);
          if (this.text[this.pos] !== "x") break;
          this.pos++;
        }
      } else {
        values = this.xList().map((v) => [v]);
      }
      parts.set(key, { pos, values });
      this.eat(",");
    }
    if (parts.size === 0) return [];
    const size = parts.get("size");
    if (!size) throw this.error(open, "expected 'size=' in the window, got none");
    const rank = size.values.length;
    for (const [key, p] of parts) {
      if (p.values.length !== rank) {
        throw this.error(
          p.pos,
          `expected ${rank} values in window '${key}' (as in size), got ${p.values.length}`,
        );
      }
    }
    const get = (key: string, i: number, j: number, dflt: number) =>
      parts.get(key)?.values[i]?.[j] ?? dflt;
    return size.values.map((_, i) => ({
      size: get("size", i, 0, 1),
      stride: get("stride", i, 0, 1),
      padLow: get("pad", i, 0, 0),
      padHigh: get("pad", i, 1, 0),
      windowDilation: get("rhs_dilate", i, 0, 1),
      baseDilation: get("lhs_dilate", i, 0, 1),
      windowReversal: get("rhs_reversal", i, 0, 0) !== 0,
    }));
  }

  metadata(d: Draft): void {
    this.expect("{", "to open the metadata");
    while (!this.eat("}")) {
      this.ws();
      const pos = this.pos;
      const key = match(RE_ATTR, this.text, pos);
      if (key === undefined) this.fail("a metadata field or '}'");
      this.pos += key.length;
      this.expect("=", `after metadata field '${key}'`);
      switch (key) {
        case "op_type":
          d.metadata.opType = this.string();
          break;
        case "op_name":
          d.metadata.opName = this.string();
          break;
        case "source_file":
          d.metadata.sourceFile = this.string();
          break;
        case "source_line":
          d.metadata.sourceLine = this.int();
          break;
        case "source_column":
          d.metadata.sourceColumn = this.int();
          break;
        default:
          if (!IGNORED_METADATA.has(key)) {
            throw this.error(
              pos,
              "expected a metadata field (op_type, op_name, source_file, source_line, " +
                `source_column), got '${key}'`,
            );
          }
          this.skipValue();
      }
      this.eat(",");
    }
  }

  // -- instructions, computations, modules --

  /** Nested instructions read while reading an instruction's operands, innermost first. */
  private nested: InstrAst[] = [];
  private anonymousCount = 0;

  instruction(): InstrAst {
    this.ws();
    const rootPos = this.pos;
    const isRoot = this.eatKeyword("ROOT");
    const { name, pos } = this.name(isRoot ? "an instruction name" : "an instruction or '}'");
    this.expect("=", `after instruction name '${name}'`);
    this.ws();
    const shapePos = this.pos;
    // XLA lets the result shape be left out for its shape rule to infer (`a = add(x, y)`).
    const shape = this.atShape() ? this.shape() : undefined;
    this.ws();
    const opcodePos = this.pos;
    const opText = match(RE_OPCODE, this.text, opcodePos);
    if (opText === undefined) this.fail(shape ? "an opcode" : "a shape or an opcode");
    if (!isOpcode(opText)) {
      const short = asyncShortForm(opText);
      if (short === undefined) {
        throw this.error(opcodePos, `expected an opcode, got unknown opcode '${opText}'`);
      }
      this.pos += opText.length;
      if (short.part !== "async-start") {
        return this.instructionRest(name, pos, isRoot, rootPos, shape, shapePos, short.part,
          opcodePos);
      }
      // The operands and attributes are the wrapped instruction's (plus the thread).
      const inner = this.instructionRest(name, pos, isRoot, rootPos, shape, shapePos, short.base,
        opcodePos, false, ["async_execution_thread"]);
      const { asyncExecutionThread, ...attrs } = inner.attrs;
      return {
        ...inner,
        opcode: "async-start",
        attrs: asyncExecutionThread !== undefined ? { asyncExecutionThread } : {},
        called: [],
        wrapped: { opcode: short.base, attrs, called: inner.called },
      };
    }
    this.pos += opText.length;
    return this.instructionRest(name, pos, isRoot, rootPos, shape, shapePos, opText, opcodePos);
  }

  /** The rest of an instruction after its opcode: operands, then (not nested) attributes. */
  private instructionRest(
    name: string,
    pos: number,
    isRoot: boolean,
    rootPos: number,
    shape: Shape | undefined,
    shapePos: number,
    opcode: Opcode,
    opcodePos: number,
    nested = false,
    extraAttrs: readonly AttrKey[] = [],
  ): InstrAst {
    const d = newDraft();
    const operands: OperandAst[] = [];
    this.ws();
    const parenPos = this.pos;
    if (opcode === "parameter") {
      this.expect("(", "before the parameter number");
      d.attrs.parameterNumber = this.natural("a parameter number");
      this.expect(")", "after the parameter number");
    } else if (opcode === "constant") {
      if (shape === undefined) {
        throw this.error(shapePos, `expected the shape of constant '${name}' (it has no rule)`);
      }
      if (shape.kind !== "array") {
        throw this.error(
          shapePos,
          `expected an array shape for constant '${name}', got ${shapeToString(shape)} ` +
            "(tuple constants are not supported)",
        );
      }
      this.expect("(", "before the constant's value");
      d.attrs.literal = this.literal(shape);
      this.expect(")", "after the constant's value");
    } else {
      this.expect("(", `before the operands of ${opcode}`);
      if (!this.eat(")")) {
        for (;;) {
          this.ws();
          const declaredPos = this.pos;
          const declared = this.atShape() ? this.shape() : undefined;
          const ref = this.name("an operand name");
          if (this.text[this.pos] === "(" && isOpcode(ref.name)) {
            // A nested instruction as the operand (XLA's `add(f32[2] negate(x), y)`): read
            // it whole, emit it before this one under a name of its own.
            const inner = this.instructionRest(
              `\u0000anonymous${this.anonymousCount++}`,
              ref.pos,
              false,
              ref.pos,
              declared,
              declaredPos,
              ref.name,
              ref.pos,
              true,
            );
            this.nested.push(inner);
            operands.push({ name: inner.name, pos: ref.pos });
            if (this.eat(",")) continue;
            if (this.eat(")")) break;
            this.fail("',' or ')' after an operand");
          }
          operands.push(declared ? { ...ref, shape: declared } : ref);
          if (this.eat(",")) continue;
          if (this.eat(")")) break;
          this.fail("',' or ')' after an operand");
        }
      }
      const arity = OPCODE_INFO[opcode].arity;
      if (arity !== "variadic" && operands.length !== arity) {
        throw this.error(
          parenPos,
          `expected ${arity} operand${arity === 1 ? "" : "s"} for ${opcode}, ` +
            `got ${operands.length}`,
        );
      }
    }
    if (!nested) this.attributes(opcode, d, extraAttrs);
    return {
      name,
      pos,
      isRoot,
      rootPos,
      shape,
      shapePos,
      ...(nested ? { anonymous: true } : {}),
      opcode,
      opcodePos,
      operands,
      attrs: assemble(opcode, d),
      metadata: d.metadata,
      called: this.calledRefs(opcode, d, opcodePos),
    };
  }

  private calledRefs(opcode: Opcode, d: Draft, pos: number): NameRef[] {
    const role = OPCODE_INFO[opcode].called;
    const one = (key: AttrKey) => d.refs[key] ?? [];
    switch (role) {
      case "none":
        return [];
      case "to_apply":
        return one("to_apply");
      case "calls":
      case "async":
        return one("calls");
      case "while":
        return [...one("condition"), ...one("body")];
      case "list":
        return one("called_computations");
      case "branches": {
        const t = d.refs.true_computation;
        const f = d.refs.false_computation;
        const b = d.refs.branch_computations;
        if (b && (t || f)) {
          throw this.error(
            d.seen.get(t ? "true_computation" : "false_computation")!,
            "expected either branch_computations or true_computation/false_computation, " +
              "got both",
          );
        }
        if (b) {
          if (b.length === 0) {
            throw this.error(d.seen.get("branch_computations")!, "expected at least one branch");
          }
          return b;
        }
        if (!t || !f) {
          const got = t ? "only true_computation" : f ? "only false_computation" : "neither";
          throw this.error(
            pos,
            "expected branch_computations={...} or both true_computation= and " +
              `false_computation= for conditional, got ${got}`,
          );
        }
        return [...t, ...f];
      }
      default: {
        const never: never = role;
        throw new Error(`unknown called role ${String(never)}`);
      }
    }
  }

  computation(): CompAst {
    this.ws();
    const isEntry = this.eatKeyword("ENTRY");
    const { name, pos } = this.name(isEntry ? "a computation name" : "a computation or ENTRY");
    let signature: SignatureAst | undefined;
    this.ws();
    if (this.text[this.pos] === "(") {
      const sigPos = this.pos;
      this.pos++;
      const params: Shape[] = [];
      if (!this.eat(")")) {
        for (;;) {
          this.name("a parameter name");
          this.expect(":", "after the parameter name");
          params.push(this.shape());
          if (this.eat(",")) continue;
          if (this.eat(")")) break;
          this.fail("',' or ')' in the parameter list");
        }
      }
      this.expect("->", "before the result shape");
      this.ws();
      const resultPos = this.pos;
      signature = { pos: sigPos, params, result: this.shape(), resultPos };
    }
    this.expect("{", `to open the body of computation '${name}'`);
    const instrs = this.computationBody(name);
    while (this.eat(",")) {
      this.ws();
      const keyPos = this.pos;
      const key = match(RE_ATTR, this.text, keyPos);
      if (key !== "execution_thread") this.fail("a computation attribute (execution_thread)");
      this.pos += key.length;
      this.expect("=", "after execution_thread");
      this.string();
    }
    return signature ? { name, pos, isEntry, signature, instrs } : { name, pos, isEntry, instrs };
  }

  /** Computations written inline as an attribute (`to_apply={ ... }`), in the order read. */
  private inlineComps: CompAst[] = [];

  /** The instructions of a computation body after its `{`, through its `}`. */
  private computationBody(name: string): InstrAst[] {
    const instrs: InstrAst[] = [];
    let rootSeen: InstrAst | undefined;
    for (;;) {
      if (this.atEnd()) this.fail(`'}' to close computation '${name}'`);
      if (this.text[this.pos] === "}" && instrs.length === 0) {
        this.fail(`an instruction (computation '${name}' is empty)`);
      }
      if (this.eat("}")) break;
      const instr = this.instruction();
      instrs.push(...this.nested);
      this.nested = [];
      if (instr.isRoot) {
        if (rootSeen) {
          throw this.error(
            instr.rootPos,
            `expected one ROOT in computation '${name}', got a second ` +
              `(the first is on line ${this.lineOf(rootSeen.rootPos)})`,
          );
        }
        rootSeen = instr;
      }
      instrs.push(instr);
    }
    return instrs;
  }

  module(): ModuleAst {
    if (this.atEnd()) this.fail("'HloModule' or a computation");
    let name: string | undefined;
    if (this.eatKeyword("HloModule")) {
      this.ws();
      const n = match(/[A-Za-z0-9_.%-]+/y, this.text, this.pos);
      if (n === undefined) this.fail("a module name after HloModule");
      this.pos += n.length;
      name = n.replace(/^%/, "");
      // Older XLA dumps end the header with a colon (`HloModule name:`).
      this.eat(":");
      while (this.eat(",")) {
        this.ws();
        const key = match(RE_ATTR, this.text, this.pos);
        if (key === undefined) this.fail("a module attribute name");
        this.pos += key.length;
        this.expect("=", `after module attribute '${key}'`);
        this.skipValue();
      }
    }
    if (name === undefined && !/[A-Za-z_%]/.test(this.peek())) {
      this.fail("'HloModule' or a computation");
    }
    const comps: CompAst[] = [];
    let entryPos: number | undefined;
    do {
      this.ws();
      const at = this.pos;
      const c = this.computation();
      if (c.isEntry) {
        if (entryPos !== undefined) {
          throw this.error(
            at,
            `expected one ENTRY computation, got a second (the first is on line ` +
              `${this.lineOf(entryPos)})`,
          );
        }
        entryPos = at;
      }
      comps.push(...this.inlineComps, c);
      this.inlineComps = [];
    } while (!this.atEnd());
    return name !== undefined ? { name, comps } : { comps };
  }
}

/**
 * XLA's ShapeUtil::Compatible: same element types and dims, ignoring layouts and which dims are
 * dynamic. Declared operand shapes and signatures are checked with it, as XLA's parser does.
 */
function compatible(a: Shape, b: Shape): boolean {
  if (a.kind === "tuple" || b.kind === "tuple") {
    return (
      a.kind === "tuple" &&
      b.kind === "tuple" &&
      a.elements.length === b.elements.length &&
      a.elements.every((e, i) => compatible(e, b.elements[i]!))
    );
  }
  return (
    a.type === b.type && a.dims.length === b.dims.length && a.dims.every((d, i) => d === b.dims[i])
  );
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Puts the attributes read for one instruction together (dot, gather, scatter records). */
function assemble(opcode: Opcode, d: Draft): Attributes {
  const attrs: Attributes = { ...d.attrs };
  if (opcode === "dot" || opcode === "ragged-dot") attrs.dot = d.dot;
  if (opcode === "ragged-dot" && attrs.rhsGroupDims === undefined) attrs.rhsGroupDims = [];
  // The printer leaves out an empty window (a convolution with no spatial dims), as XLA does.
  if (opcode === "convolution" && attrs.window === undefined) attrs.window = [];
  if (opcode === "gather") attrs.gather = { ...d.gather, indexVectorDim: d.indexVectorDim };
  if (opcode === "scatter") attrs.scatter = { ...d.scatter, indexVectorDim: d.indexVectorDim };
  return attrs;
}

const ATTR_PARSERS = {
  iota_dimension: (p, d) => void (d.attrs.iotaDimension = p.int()),
  dimensions: (p, d) => void (d.attrs.dimensions = p.intList()),
  direction: (p, d) =>
    void (d.attrs.direction = p.oneOf<ComparisonDirection>(
      COMPARISON_DIRECTIONS,
      "a comparison direction",
    )),
  type: (p, d) => void (d.attrs.comparisonType = p.oneOf(COMPARISON_TYPES, "a comparison type")),
  slice: (p, d) => void (d.attrs.slice = p.slice()),
  dynamic_slice_sizes: (p, d) => void (d.attrs.dynamicSliceSizes = p.intList()),
  padding: (p, d) => void (d.attrs.padding = p.padding()),
  lhs_batch_dims: (p, d) => void (d.dot.lhsBatch = p.intList()),
  lhs_contracting_dims: (p, d) => void (d.dot.lhsContracting = p.intList()),
  rhs_batch_dims: (p, d) => void (d.dot.rhsBatch = p.intList()),
  rhs_contracting_dims: (p, d) => void (d.dot.rhsContracting = p.intList()),
  window: (p, d) => void (d.attrs.window = p.window()),
  dim_labels: (p, d) => {
    p.ws();
    const at = p.pos;
    const labels = match(/[A-Za-z0-9_?>-]+/y, p.text, at);
    if (labels === undefined) return p.fail("dim_labels like b01f_01io->b01f");
    try {
      d.attrs.convDims = convDimsFromLabels(labels);
    } catch (e) {
      const why = message(e);
      throw p.error(at, `expected dim_labels like b01f_01io->b01f, got '${labels}' (${why})`);
    }
    p.pos = at + labels.length;
  },
  feature_group_count: (p, d) => void (d.attrs.featureGroupCount = p.int()),
  batch_group_count: (p, d) => void (d.attrs.batchGroupCount = p.int()),
  offset_dims: (p, d) => void (d.gather.offsetDims = p.intList()),
  collapsed_slice_dims: (p, d) => void (d.gather.collapsedSliceDims = p.intList()),
  start_index_map: (p, d) => void (d.gather.startIndexMap = p.intList()),
  operand_batching_dims: (p, d) => void (d.gather.operandBatchingDims = p.intList()),
  start_indices_batching_dims: (p, d) =>
    void (d.gather.startIndicesBatchingDims = p.intList()),
  update_window_dims: (p, d) => void (d.scatter.updateWindowDims = p.intList()),
  inserted_window_dims: (p, d) => void (d.scatter.insertedWindowDims = p.intList()),
  scatter_dims_to_operand_dims: (p, d) =>
    void (d.scatter.scatterDimsToOperandDims = p.intList()),
  input_batching_dims: (p, d) => void (d.scatter.inputBatchingDims = p.intList()),
  scatter_indices_batching_dims: (p, d) =>
    void (d.scatter.scatterIndicesBatchingDims = p.intList()),
  index_vector_dim: (p, d) => void (d.indexVectorDim = p.int()),
  slice_sizes: (p, d) => void (d.attrs.gatherSliceSizes = p.intList()),
  indices_are_sorted: (p, d) => void (d.attrs.indicesAreSorted = p.bool()),
  unique_indices: (p, d) => void (d.attrs.uniqueIndices = p.bool()),
  is_stable: (p, d) => void (d.attrs.isStable = p.bool()),
  index: (p, d) => void (d.attrs.tupleIndex = p.int()),
  kind: (p, d) => void (d.attrs.fusionKind = p.oneOf(FUSION_KINDS, "a fusion kind")),
  to_apply: (p, d) => void (d.refs.to_apply = [p.computationRef()]),
  calls: (p, d) => void (d.refs.calls = [p.computationRef()]),
  condition: (p, d) => void (d.refs.condition = [p.computationRef()]),
  body: (p, d) => void (d.refs.body = [p.computationRef()]),
  true_computation: (p, d) => void (d.refs.true_computation = [p.computationRef()]),
  false_computation: (p, d) => void (d.refs.false_computation = [p.computationRef()]),
  branch_computations: (p, d) =>
    void (d.refs.branch_computations = p.computationRefList("branch_computations")),
  custom_call_target: (p, d) => void (d.attrs.customCallTarget = p.string()),
  called_computations: (p, d) =>
    void (d.refs.called_computations = p.computationRefList("called_computations")),
  custom_call_has_side_effect: (p, d) => void (d.attrs.customCallHasSideEffect = p.bool()),
  output_to_operand_aliasing: (p, d) => void (d.attrs.outputToOperandAliasing = p.aliasing()),
  api_version: (p, d) => {
    const names = Object.keys(CUSTOM_CALL_API_VERSIONS) as CustomCallApiVersion[];
    const v = p.oneOf(names, "a custom-call API version");
    // API_VERSION_ORIGINAL is XLA's default (what an absent api_version means).
    if (v !== "API_VERSION_ORIGINAL") d.attrs.apiVersion = v;
  },
  operand_layout_constraints: (p, d) => {
    p.expect("{", "to open the operand layout constraints");
    const shapes: Shape[] = [];
    if (!p.eat("}")) {
      for (;;) {
        shapes.push(p.shape());
        if (p.eat(",")) continue;
        if (p.eat("}")) break;
        p.fail("',' or '}' in the operand layout constraints");
      }
    }
    d.attrs.operandLayoutConstraints = shapes;
  },
  algorithm: (p, d) => {
    // A dot's precision algorithm, or an rng-bit-generator's (XLA's two uses of the key).
    p.ws();
    if (p.text.startsWith("rng_", p.pos)) {
      const names = Object.keys(RNG_ALGORITHMS) as RngAlgorithm[];
      d.attrs.rngAlgorithm = p.oneOf(names, "an rng algorithm");
      return;
    }
    const names = Object.keys(DOT_ALGORITHMS) as DotAlgorithm[];
    d.attrs.dotAlgorithm = p.oneOf(names, "a dot algorithm");
  },
  is_host_transfer: (p, d) => void (d.attrs.isHostTransfer = p.bool()),
  infeed_config: (p, d) => void (d.attrs.infeedConfig = p.string()),
  outfeed_shape: (p, d) => void (d.attrs.outfeedShape = p.shape()),
  outfeed_config: (p, d) => void (d.attrs.outfeedConfig = p.string()),
  exponent_bits: (p, d) => void (d.attrs.exponentBits = p.int()),
  mantissa_bits: (p, d) => void (d.attrs.mantissaBits = p.int()),
  distribution: (p, d) => {
    const names = Object.keys(RNG_DISTRIBUTIONS) as RngDistribution[];
    d.attrs.rngDistribution = p.oneOf(names, "an rng distribution");
  },
  cross_program_prefetch_index: (p, d) => void (d.attrs.crossProgramPrefetchIndex = p.int()),
  lhs_ragged_dims: (p, d) => void (d.attrs.lhsRaggedDims = p.intList()),
  rhs_group_dims: (p, d) => void (d.attrs.rhsGroupDims = p.intList()),
  num_carries: (p, d) => void (d.attrs.numCarries = p.int()),
  is_reverse: (p, d) => void (d.attrs.isReverse = p.bool()),
  is_associative: (p, d) => void (d.attrs.isAssociative = p.bool()),
  is_composite: (p, d) => void (d.attrs.isComposite = p.bool()),
  async_execution_thread: (p, d) => void (d.attrs.asyncExecutionThread = p.string()),
  channel_id: (p, d) => {
    // XLA: a channel id of 0 is none (its proto cannot tell them apart).
    const id = p.natural("a channel id");
    if (id !== 0) d.attrs.channelId = id;
  },
  replica_groups: (p, d) => void (d.attrs.replicaGroups = p.groups("replica_groups")),
  source_target_pairs: (p, d) => {
    const at = p.pos;
    const pairs = p.groups("source_target_pairs");
    const bad = pairs.find((g) => g.length !== 2);
    if (bad) throw p.error(at, `expected source_target_pairs of pairs {a,b}, got {${bad}}`);
    d.attrs.sourceTargetPairs = pairs.map((g) => [g[0]!, g[1]!]);
  },
  constrain_layout: (p, d) => void (d.attrs.constrainLayout = p.bool()),
  use_global_device_ids: (p, d) => void (d.attrs.useGlobalDeviceIds = p.bool()),
  backend_config: (p, d) => {
    d.attrs.backendConfig = p.peek() === "{" ? p.skipBalanced() : p.string();
  },
  "control-predecessors": (p, d) => {
    p.expect("{", "to open control-predecessors");
    const names: string[] = [];
    if (!p.eat("}")) {
      for (;;) {
        names.push(p.name("an instruction name").name);
        if (p.eat(",")) continue;
        if (p.eat("}")) break;
        p.fail("',' or '}' in control-predecessors");
      }
    }
    d.attrs.controlPredecessors = names;
  },
  sharding: (p, d) => {
    if (p.peek() !== "{") p.fail("a sharding in braces ({replicated}, {maximal device=0}, ...)");
    const raw = p.skipBalanced();
    const s = parseSharding(raw);
    d.attrs.sharding = s ? shardingToString(s) : raw;
  },
  frontend_attributes: (p, d) => {
    // `frontend_attributes={}` is none, as in XLA (whose proto always carries an empty one).
    const attrs = p.frontendAttributes();
    if (attrs.length > 0) d.attrs.frontendAttributes = attrs;
  },
  metadata: (p, d) => p.metadata(d),
} satisfies { [K in AttrKey]: (p: Parser, d: Draft) => void };

// ---- building the module ------------------------------------------------------------------

function build(p: Parser, ast: ModuleAst): Module {
  const entryAst = ast.comps.find((c) => c.isEntry) ?? ast.comps[ast.comps.length - 1]!;
  const module = new Module(ast.name ?? `module_${entryAst.name}`);
  const comps = new Map<string, Computation>();
  const compAsts = new Map<string, CompAst>();
  for (const c of ast.comps) {
    const prev = compAsts.get(c.name);
    if (prev) {
      throw p.error(
        c.pos,
        `expected a new computation name, got '${c.name}' again ` +
          `(first defined on line ${p.lineOf(prev.pos)})`,
      );
    }
    compAsts.set(c.name, c);
    comps.set(c.name, module.addComputation(c.name));
  }
  module.entry = comps.get(entryAst.name)!;

  // Instruction names are unique per computation in the text but per module in a Module; a
  // name reused in another computation gets a fresh suffix no name in the text uses.
  const textNames = new Set<string>();
  for (const c of ast.comps) for (const i of c.instrs) textNames.add(i.name);
  const freshName = (name: string): string => {
    if (!module.hasName(name)) return name;
    for (let k = 1; ; k++) {
      const n = `${name}.${k}`;
      if (!textNames.has(n) && !module.hasName(n)) return n;
    }
  };

  // A nested instruction is named as XLA names it: `<opcode>.anon`, suffixed if taken.
  const anonymousName = (opcode: string): string => {
    const base = `${opcode}.anon`;
    if (!textNames.has(base) && !module.hasName(base)) return base;
    for (let k = 1; ; k++) {
      const n = `${base}.${k}`;
      if (!textNames.has(n) && !module.hasName(n)) return n;
    }
  };

  for (const cAst of ast.comps) {
    const comp = comps.get(cAst.name)!;
    const scope = new Map<string, Instruction>();
    const defined = new Map<string, InstrAst>();
    for (const i of cAst.instrs) if (!defined.has(i.name)) defined.set(i.name, i);
    const params = new Map<number, InstrAst>();
    for (const iAst of cAst.instrs) {
      if (scope.has(iAst.name)) {
        throw p.error(
          iAst.pos,
          `expected a new instruction name, got '${iAst.name}' again ` +
            `(first defined on line ${p.lineOf(defined.get(iAst.name)!.pos)})`,
        );
      }
      const operands = iAst.operands.map((ref) => {
        const op = scope.get(ref.name);
        if (!op) {
          const later = defined.get(ref.name);
          const why = later
            ? ` (it is defined later, on line ${p.lineOf(later.pos)})`
            : ` (no instruction of that name in '${cAst.name}')`;
          throw p.error(
            ref.pos,
            `expected the name of an instruction defined earlier in '${cAst.name}', ` +
              `got '${ref.name}'${why}`,
          );
        }
        if (ref.shape && !compatible(ref.shape, op.shape)) {
          throw p.error(
            ref.pos,
            `expected operand '${ref.name}' to have its shape ${shapeToString(op.shape)}, ` +
              `got declared shape ${shapeToString(ref.shape)}`,
          );
        }
        return op;
      });
      const lookUp = (ref: NameRef) => {
        const c = comps.get(ref.name);
        if (!c) {
          throw p.error(
            ref.pos,
            `expected the name of a computation in the module, got '${ref.name}'`,
          );
        }
        return c;
      };
      const called = iAst.called.map(lookUp);
      if (iAst.wrapped) called.push(wrappedComputation(p, module, iAst, operands, lookUp));
      if (iAst.opcode === "parameter") {
        const n = iAst.attrs.parameterNumber!;
        const prev = params.get(n);
        if (prev) {
          throw p.error(
            iAst.opcodePos,
            `expected a new parameter number, got parameter(${n}) again ` +
              `(first '${prev.name}' on line ${p.lineOf(prev.pos)})`,
          );
        }
        params.set(n, iAst);
      }
      let shape = iAst.shape;
      if (shape === undefined) {
        if (DECLARED_SHAPE_OPCODES.has(iAst.opcode)) {
          throw p.error(
            iAst.shapePos,
            `expected the result shape of ${iAst.opcode} '${displayName(iAst)}' (no rule ` +
              "infers it; XLA infers only the shapes of opcodes with one)",
          );
        }
        try {
          shape = inferShape(
            iAst.opcode,
            operands.map((o) => o.shape),
            iAst.attrs,
            called,
          );
        } catch (e) {
          throw p.error(
            iAst.opcodePos,
            `expected operands whose shapes give ${iAst.opcode} '${displayName(iAst)}' a result ` +
              `shape (it has none written), got: ${message(e)}`,
          );
        }
      }
      // An outfeed without outfeed_shape= sends its operand's shape (XLA's parser, which prints
      // it on every outfeed).
      const attrs =
        iAst.opcode === "outfeed" && iAst.attrs.outfeedShape === undefined && operands[0]
          ? { ...iAst.attrs, outfeedShape: operands[0].shape }
          : iAst.attrs;
      const instr = comp.addInstruction({
        opcode: iAst.opcode,
        shape,
        operands,
        attrs,
        called,
        metadata: iAst.metadata,
        name: iAst.anonymous ? anonymousName(iAst.opcode) : freshName(iAst.name),
      });
      scope.set(iAst.name, instr);
      if (iAst.isRoot) comp.root = instr;
    }
    // Control predecessors name instructions as the text does; a renamed one (a name another
    // computation also used) is named as it is now.
    for (const iAst of cAst.instrs) {
      const preds = iAst.attrs.controlPredecessors;
      if (preds === undefined) continue;
      const instr = scope.get(iAst.name)!;
      instr.attrs.controlPredecessors = preds.map((s) => {
        const x = scope.get(s);
        if (x === undefined) {
          throw p.error(
            iAst.pos,
            `expected control-predecessors of '${iAst.name}' to name instructions of ` +
              `'${cAst.name}', got '${s}'`,
          );
        }
        return x.name;
      });
    }
    if (cAst.signature) checkSignature(p, comp, cAst.signature);
  }
  return module;
}

/**
 * The computation of XLA's short async form `x = ((a, b), r, ...) op-start(a, b), <op's attrs>`:
 * one parameter per operand and `op` of them as its ROOT, of the start's result shape r.
 */
function wrappedComputation(
  p: Parser,
  module: Module,
  iAst: InstrAst,
  operands: readonly Instruction[],
  lookUp: (ref: NameRef) => Computation,
): Computation {
  const w = iAst.wrapped!;
  const s = iAst.shape;
  if (s === undefined || s.kind !== "tuple" || s.elements.length < 2) {
    throw p.error(
      iAst.shapePos,
      `expected the shape of ${w.opcode}-start '${iAst.name}' to be ((operands...), result, ...)`,
    );
  }
  const c = module.addComputation(module.uniqueComputationName(`${w.opcode}.async_computation`));
  const params = operands.map((o, i) =>
    c.addInstruction({
      opcode: "parameter",
      shape: o.shape,
      attrs: { parameterNumber: i },
      name: module.uniqueName(`${w.opcode}.param_${i}`),
    }),
  );
  c.root = c.addInstruction({
    opcode: w.opcode,
    shape: s.elements[1]!,
    operands: params,
    attrs: w.attrs,
    called: w.called.map(lookUp),
    name: module.uniqueName(w.opcode),
  });
  return c;
}

function displayName(i: InstrAst): string {
  return i.anonymous ? `(nested ${i.opcode})` : i.name;
}

/** A written signature must agree with the parameters and the ROOT. */
function checkSignature(p: Parser, comp: Computation, sig: SignatureAst): void {
  const params = comp.parameters;
  if (params.length !== sig.params.length) {
    throw p.error(
      sig.pos,
      `expected the signature of '${comp.name}' to list its ${params.length} parameter(s), ` +
        `got ${sig.params.length}`,
    );
  }
  sig.params.forEach((s, i) => {
    const param = params[i]!;
    if (param.attrs.parameterNumber !== i || !compatible(param.shape, s)) {
      throw p.error(
        sig.pos,
        `expected signature parameter ${i} of '${comp.name}' to be ` +
          `${shapeToString(param.shape, false)} (parameter(${param.attrs.parameterNumber}) ` +
          `'${param.name}'), got ${shapeToString(s, false)}`,
      );
    }
  });
  if (!compatible(comp.root.shape, sig.result)) {
    throw p.error(
      sig.resultPos,
      `expected the result shape of '${comp.name}' to be its ROOT's shape ` +
        `${shapeToString(comp.root.shape, false)}, got ${shapeToString(sig.result, false)}`,
    );
  }
}

// ---- entry points -------------------------------------------------------------------------

/** Runs `f`, turning any failure that is not already a ParseError into one at the cursor. */
function guarded<T>(p: Parser, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof ParseError) throw e;
    throw p.error(p.pos, `expected well-formed HLO text, got an internal error: ${message(e)}`);
  }
}

/** Parses a whole module in HLO text. Throws ParseError (only) on malformed text. */
export function parseHlo(text: string): Module {
  const p = new Parser(text);
  return guarded(p, () => build(p, p.module()));
}

/** Parses one shape, e.g. `f32[2,<=8]{1,0}` or `(f32[2], s32[])`. */
export function parseShape(text: string): Shape {
  const p = new Parser(text);
  return guarded(p, () => {
    const s = p.shape();
    if (!p.atEnd()) p.fail("the end of the shape");
    return s;
  });
}

/** Parses a literal's text (`1.5`, `{1, 2}`, `{ { 1, 2 }, { 3, 4 } }`) for a type and dims. */
export function parseLiteralText(
  type: ElementType,
  dims: readonly number[],
  text: string,
): Literal {
  const p = new Parser(text);
  return guarded(p, () => {
    const lit = p.literal({ kind: "array", type, dims, dynamic: dims.map(() => false) });
    if (!p.atEnd()) p.fail("the end of the literal");
    return lit;
  });
}
