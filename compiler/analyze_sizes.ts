// Control flow on a tensor's SIZE, found in the source (for compiler/analyze.ts). Bounded
// dynamism traces the user's code at a few sizes of a bucket and compares the programs; a
// condition that flips between the sampled sizes (`T % 2 === 0`, `T === 37`) would let one
// program serve sizes traced on the other side of the branch. So every branch whose condition
// depends on a size is reported here, and compile() keeps such code static when its traces
// evaluated the condition (compiler/dynamic.ts, compiler/coverage.ts). A value depends on
// a size when it reads `.shape` (its elements), `.size(...)` or `.numel()`, or is computed or
// assigned (transitively, through locals, destructuring, calls and callbacks) from one; the
// rank (`.ndim`, `.dim()`, `x.shape.length`) is not a size, since a shape guard fixes it. A
// parameter typed `number` is a possible size too, which counts when the function is reached
// from other code (a `this.method`, a helper, a submodule's forward). The one exception is a
// GUARD: `if (cond) throw ...` where cond is a range check (`<`, `>`, `<=`, `>=` of integer
// linear expressions of sizes) or `!==` of such expressions, or an `||` of guards. Its
// throwing sizes form a prefix or suffix of a bucket (or all but one size), which tracing at
// the bucket's bottom and top already catches (the top is lowered by bisection), so it cannot
// make a program serve a size eager code rejects.

import type { ts } from "ts-morph";
import { tsApi, type ParsedFile } from "./analyze_source.ts";
import type { Positioner } from "./analyze_walk.ts";

export interface SizeBranch {
  /** The condition (or loop, switch, index), as written (shortened to one line). */
  expr: string;
  line: number;
  column: number;
  /** What branches: `if`, `?:`, `&&`, `||`, `??`, `while`, `for`, `switch`, `index`... */
  kind: string;
  /**
   * Set when the condition depends on sizes only through this parameter of the function
   * (`number`-typed): a size only when the function is called with one.
   */
  parameter?: string;
  file?: string;
  via?: string;
}

type Kind = "shape" | "size";

/** How a value depends on sizes: a whole shape (its length is the rank) or a size. */
interface Taint {
  kind: Kind;
  /** The parameter it comes from, when only from parameters. */
  param?: string;
}

const SIZE: Taint = { kind: "size" };
const SHAPE: Taint = { kind: "shape" };

function join(a: Taint | undefined, b: Taint | undefined): Taint | undefined {
  if (!a) return b && { kind: "size", ...(b.param !== undefined && { param: b.param }) };
  if (!b) return { kind: "size", ...(a.param !== undefined && { param: a.param }) };
  return a.param !== undefined && b.param !== undefined ? { kind: "size", param: a.param } : SIZE;
}

function shorten(text: string): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length > 80 ? `${one.slice(0, 77)}...` : one;
}

/** One flow into a local variable. */
interface Flow {
  from: ts.Expression;
  /** "value": the whole value; "element": an element of it (destructuring, for-of). */
  how: "value" | "element";
  /** Plain `const x = e` / `[a, b] = shape`: keeps linearity. */
  linear: boolean;
}

/** Finds the branches on sizes in one function (or class) node. */
export function findSizeBranches(
  parsed: ParsedFile,
  root: ts.Node,
  position: Positioner,
): SizeBranch[] {
  return new SizeWalk(parsed, root, position).run();
}

class SizeWalk {
  private readonly t = tsApi();
  private readonly sf: ts.SourceFile;
  private readonly checker: ts.TypeChecker;
  private readonly flows = new Map<ts.Symbol, Flow[]>();
  private readonly params = new Map<ts.Symbol, Taint>();
  /** Parameters of callbacks: tainted when the call they are passed to is. */
  private readonly callbackParams = new Map<ts.Symbol, ts.CallExpression>();
  private symbolTaint = new Map<ts.Symbol, Taint | undefined>();
  private readonly out: SizeBranch[] = [];
  /** Logical expressions already reported as part of a condition. */
  private readonly inCondition = new Set<ts.Node>();

  constructor(
    parsed: ParsedFile,
    private readonly root: ts.Node,
    private readonly position: Positioner,
  ) {
    this.sf = parsed.sourceFile;
    this.checker = parsed.checker;
  }

  run(): SizeBranch[] {
    this.collect(this.root);
    // Taint of locals to a fixpoint: flows can go through each other in any order.
    for (let round = 0; round < 20; round++) {
      const before = this.symbolTaint;
      const next = new Map<ts.Symbol, Taint | undefined>();
      for (const s of new Set([...this.flows.keys(), ...this.callbackParams.keys()])) {
        next.set(s, this.computeSymbol(s, before));
      }
      this.symbolTaint = next;
      if ([...next].every(([s, v]) => sameTaint(v, before.get(s)))) break;
    }
    this.find(this.root);
    return this.out.sort((a, b) => a.line - b.line || a.column - b.column);
  }

  // ---- flows into locals

  private sym(n: ts.Node): ts.Symbol | undefined {
    const t = this.t;
    if (t.isShorthandPropertyAssignment(n.parent) && n.parent.name === n) {
      return this.checker.getShorthandAssignmentValueSymbol(n.parent);
    }
    return this.checker.getSymbolAtLocation(n);
  }

  private addFlow(name: ts.Node, flow: Flow): void {
    const t = this.t;
    if (t.isIdentifier(name)) {
      const s = this.sym(name);
      if (!s) return;
      let list = this.flows.get(s);
      if (!list) this.flows.set(s, (list = []));
      list.push(flow);
      return;
    }
    if (t.isArrayBindingPattern(name) || t.isArrayLiteralExpression(name)) {
      for (const el of name.elements) {
        if (t.isOmittedExpression(el)) continue;
        const target = t.isBindingElement(el) ? el.name : el;
        const spread = t.isSpreadElement(target) || (t.isBindingElement(el) && el.dotDotDotToken);
        const inner = t.isSpreadElement(target) ? target.expression : target;
        this.addFlow(inner, {
          from: flow.from,
          how: spread ? flow.how : "element",
          linear: flow.linear && flow.how === "value" && !spread,
        });
      }
      return;
    }
    if (t.isObjectBindingPattern(name) || t.isObjectLiteralExpression(name)) {
      const props = t.isObjectBindingPattern(name) ? name.elements : name.properties;
      for (const p of props) {
        const target = t.isBindingElement(p)
          ? p.name
          : t.isPropertyAssignment(p)
            ? p.initializer
            : t.isShorthandPropertyAssignment(p)
              ? p.name
              : t.isSpreadAssignment(p)
                ? p.expression
                : undefined;
        if (target) this.addFlow(target, { from: flow.from, how: "element", linear: false });
      }
      return;
    }
    if (t.isParenthesizedExpression(name)) this.addFlow(name.expression, flow);
  }

  private collect(node: ts.Node): void {
    const t = this.t;
    if (t.isVariableDeclaration(node) && node.initializer) {
      const list = node.parent;
      const isConst =
        t.isVariableDeclarationList(list) && (list.flags & t.NodeFlags.Const) !== 0;
      this.addFlow(node.name, { from: node.initializer, how: "value", linear: isConst });
    } else if (t.isBinaryExpression(node)) {
      const k = node.operatorToken.kind;
      if (k >= t.SyntaxKind.FirstAssignment && k <= t.SyntaxKind.LastAssignment) {
        this.addFlow(node.left, { from: node.right, how: "value", linear: false });
        // `n += 1` keeps n's own dependence: a reassigned variable is never linear.
        if (k !== t.SyntaxKind.EqualsToken) {
          this.addFlow(node.left, { from: node.left, how: "value", linear: false });
        }
      }
    } else if (t.isForOfStatement(node) || t.isForInStatement(node)) {
      const init = node.initializer;
      const target = t.isVariableDeclarationList(init) ? init.declarations[0]?.name : init;
      if (target) this.addFlow(target, { from: node.expression, how: "element", linear: false });
    } else if (t.isParameter(node) && t.isIdentifier(node.name)) {
      const s = this.sym(node.name);
      const fn = node.parent;
      if (s && fn === this.root && this.isNumberParam(node)) {
        this.params.set(s, { kind: "size", param: node.name.text });
      } else if (s && t.isCallExpression(fn.parent) && fn.parent.arguments.some((a) => a === fn)) {
        this.callbackParams.set(s, fn.parent);
      }
      if (node.initializer) {
        this.addFlow(node.name, { from: node.initializer, how: "value", linear: false });
      }
    }
    t.forEachChild(node, (c) => this.collect(c));
  }

  private isNumberParam(p: ts.ParameterDeclaration): boolean {
    const t = this.t;
    if (p.dotDotDotToken) return false;
    const isNumber = (type: ts.TypeNode): boolean =>
      type.kind === t.SyntaxKind.NumberKeyword ||
      (t.isUnionTypeNode(type) && type.types.some(isNumber)) ||
      (t.isParenthesizedTypeNode(type) && isNumber(type.type));
    if (p.type) return isNumber(p.type);
    return p.initializer !== undefined && t.isNumericLiteral(p.initializer);
  }

  private computeSymbol(
    s: ts.Symbol,
    prev: Map<ts.Symbol, Taint | undefined>,
  ): Taint | undefined {
    this.symbolTaint = prev;
    let out: Taint | undefined = this.params.get(s);
    const call = this.callbackParams.get(s);
    if (call) {
      const callee = this.skip(call.expression);
      const recv = this.t.isPropertyAccessExpression(callee)
        ? this.taint(callee.expression)
        : undefined;
      for (const a of call.arguments) {
        if (!this.t.isArrowFunction(a) && !this.t.isFunctionExpression(a)) {
          const ta = this.taint(a);
          if (ta) out = join(out, ta);
        }
      }
      if (recv) out = join(out, recv);
    }
    for (const f of this.flows.get(s) ?? []) {
      const v = this.taint(f.from);
      if (!v) continue;
      // An element of a shape is a size; of anything else, the same dependence.
      const add: Taint = f.how === "element" ? (v.kind === "shape" ? SIZE : join(v, v)!) : v;
      out = out ? join(out, add) : add;
    }
    return out;
  }

  // ---- taint of an expression

  private skip(e: ts.Expression): ts.Expression {
    const t = this.t;
    let n = e;
    while (
      t.isParenthesizedExpression(n) ||
      t.isAsExpression(n) ||
      t.isSatisfiesExpression(n) ||
      t.isNonNullExpression(n) ||
      t.isTypeAssertionExpression(n)
    ) {
      n = n.expression;
    }
    return n;
  }

  private taint(expr: ts.Expression): Taint | undefined {
    const t = this.t;
    const e = this.skip(expr);
    if (t.isIdentifier(e)) {
      const s = this.sym(e);
      return s ? this.symbolTaint.get(s) ?? this.params.get(s) : undefined;
    }
    if (t.isPropertyAccessExpression(e)) {
      const name = e.name.text;
      const recv = this.taint(e.expression);
      if (name === "ndim") return undefined;
      if (name === "length") return recv?.kind === "shape" ? undefined : recv && join(recv, recv);
      if (name === "shape" && !recv) return SHAPE;
      return recv && join(recv, recv);
    }
    if (t.isElementAccessExpression(e)) {
      const recv = this.taint(e.expression);
      if (recv) return recv.kind === "shape" ? SIZE : join(recv, recv);
      return join(undefined, this.taint(e.argumentExpression));
    }
    if (t.isCallExpression(e) || t.isNewExpression(e)) {
      const callee = this.skip(e.expression);
      const args = e.arguments ?? [];
      if (t.isPropertyAccessExpression(callee) && t.isCallExpression(e)) {
        const m = callee.name.text;
        if (m === "dim" && args.length === 0) return undefined;
        if (m === "size") return args.length === 0 ? SHAPE : SIZE;
        if (m === "numel" && args.length === 0) return SIZE;
      }
      let out: Taint | undefined;
      let any = false;
      if (t.isPropertyAccessExpression(callee)) {
        const r = this.taint(callee.expression);
        if (r) {
          any = true;
          out = join(out, r);
        }
      }
      for (const a of args) {
        const v = this.taint(a);
        if (v) {
          any = true;
          out = join(out, v);
        }
      }
      return any ? out : undefined;
    }
    if (t.isArrayLiteralExpression(e)) {
      let out: Taint | undefined;
      let grows = false;
      for (const el of e.elements) {
        const spread = t.isSpreadElement(el);
        const v = this.taint(spread ? el.expression : el);
        if (!v) continue;
        if (spread && v.kind !== "shape") grows = true;
        out = out ? join(out, v) : v;
      }
      // `[b, s]`, `[...x.shape, 1]`: a fixed number of sizes, like a shape.
      if (!out) return undefined;
      return grows ? join(out, out) : out.param !== undefined ? out : SHAPE;
    }
    if (t.isArrowFunction(e) || t.isFunctionExpression(e) || t.isClassExpression(e)) {
      return undefined;
    }
    let out: Taint | undefined;
    let any = false;
    t.forEachChild(e, (c) => {
      if (t.isExpression(c) || t.isTemplateSpan(c) || t.isPropertyAssignment(c) ||
        t.isShorthandPropertyAssignment(c) || t.isSpreadAssignment(c)) {
        const inner: ts.Expression = t.isTemplateSpan(c)
          ? c.expression
          : t.isPropertyAssignment(c)
            ? c.initializer
            : t.isShorthandPropertyAssignment(c)
              ? c.name
              : t.isSpreadAssignment(c)
                ? c.expression
                : c;
        const v = this.taint(inner);
        if (v) {
          any = true;
          out = join(out, v);
        }
      }
    });
    return any ? out : undefined;
  }

  // ---- guards

  /** An integer linear expression of sizes (monotone in the bucket's one size). */
  private linear(expr: ts.Expression, seen = new Set<ts.Symbol>()): boolean {
    const t = this.t;
    const e = this.skip(expr);
    if (!this.taint(e)) return true;
    if (t.isIdentifier(e)) {
      const s = this.sym(e);
      if (!s || seen.has(s)) return false;
      seen.add(s);
      if (this.params.has(s) && !this.flows.has(s)) return true;
      const flows = this.flows.get(s);
      if (!flows || this.callbackParams.has(s)) return false;
      return flows.every((f) =>
        f.linear &&
        (f.how === "value"
          ? this.linear(f.from, seen)
          : this.taint(f.from)?.kind === "shape" && this.isShapeRead(f.from)));
    }
    if (t.isPrefixUnaryExpression(e)) {
      const k = e.operator;
      return (k === t.SyntaxKind.MinusToken || k === t.SyntaxKind.PlusToken) &&
        this.linear(e.operand, seen);
    }
    if (t.isBinaryExpression(e)) {
      const k = e.operatorToken.kind;
      if (k === t.SyntaxKind.PlusToken || k === t.SyntaxKind.MinusToken) {
        return this.linear(e.left, seen) && this.linear(e.right, seen);
      }
      if (k === t.SyntaxKind.AsteriskToken) {
        return (!this.taint(e.left) && this.linear(e.right, seen)) ||
          (!this.taint(e.right) && this.linear(e.left, seen));
      }
      return false;
    }
    if (t.isElementAccessExpression(e)) return this.isShapeRead(e.expression);
    if (t.isConditionalExpression(e)) {
      // `past === null ? 0 : past[0].size(-2)`: the condition is fixed within a bucket.
      return !this.taint(e.condition) && this.linear(e.whenTrue, new Set(seen)) &&
        this.linear(e.whenFalse, new Set(seen));
    }
    if (t.isCallExpression(e)) {
      const c = this.skip(e.expression);
      return t.isPropertyAccessExpression(c) && c.name.text === "size" &&
        e.arguments.length === 1 && !this.taint(e.arguments[0]!) && !this.taint(c.expression);
    }
    return false;
  }

  /** `x.shape`, `x.size()` on something that is not itself a size. */
  private isShapeRead(expr: ts.Expression): boolean {
    const t = this.t;
    const e = this.skip(expr);
    if (t.isPropertyAccessExpression(e)) {
      return e.name.text === "shape" && !this.taint(e.expression);
    }
    if (t.isCallExpression(e)) {
      const c = this.skip(e.expression);
      return t.isPropertyAccessExpression(c) && c.name.text === "size" &&
        e.arguments.length === 0 && !this.taint(c.expression);
    }
    if (t.isIdentifier(e)) {
      const s = this.sym(e);
      const flows = s && this.flows.get(s);
      return !!flows && flows.length === 1 && flows[0]!.linear && flows[0]!.how === "value" &&
        this.isShapeRead(flows[0]!.from);
    }
    return false;
  }

  /** A condition under which throwing is safe for buckets (see the file comment). */
  private guardCondition(expr: ts.Expression, negated = false): boolean {
    const t = this.t;
    const e = this.skip(expr);
    if (!this.taint(e)) return true;
    if (t.isPrefixUnaryExpression(e) && e.operator === t.SyntaxKind.ExclamationToken) {
      return this.guardCondition(e.operand, !negated);
    }
    if (!t.isBinaryExpression(e)) return false;
    const k = e.operatorToken.kind;
    const S = t.SyntaxKind;
    if (k === (negated ? S.AmpersandAmpersandToken : S.BarBarToken)) {
      return this.guardCondition(e.left, negated) && this.guardCondition(e.right, negated);
    }
    const relational = [S.LessThanToken, S.GreaterThanToken, S.LessThanEqualsToken,
      S.GreaterThanEqualsToken];
    const unequal = negated ? [S.EqualsEqualsEqualsToken, S.EqualsEqualsToken]
      : [S.ExclamationEqualsEqualsToken, S.ExclamationEqualsToken];
    if (!relational.includes(k) && !unequal.includes(k)) return false;
    return this.linear(e.left) && this.linear(e.right);
  }

  /** A statement every path of which ends in `throw`. */
  private onlyThrows(s: ts.Statement): boolean {
    const t = this.t;
    if (t.isThrowStatement(s)) return true;
    if (!t.isBlock(s)) return false;
    const last = s.statements[s.statements.length - 1];
    if (!last || !t.isThrowStatement(last)) return false;
    let escapes = false;
    const visit = (n: ts.Node): void => {
      if (escapes || t.isFunctionLike(n) || t.isClassLike(n)) return;
      if (t.isReturnStatement(n) || t.isBreakStatement(n) || t.isContinueStatement(n)) {
        escapes = true;
        return;
      }
      t.forEachChild(n, visit);
    };
    visit(s);
    return !escapes;
  }

  // ---- the branches

  private report(node: ts.Node, kind: string, taint: Taint): void {
    this.out.push({
      expr: shorten(node.getText(this.sf)),
      ...this.position(node),
      kind,
      ...(taint.param !== undefined && { parameter: taint.param }),
    });
  }

  private markCondition(expr: ts.Expression): void {
    const t = this.t;
    const e = this.skip(expr);
    if (t.isPrefixUnaryExpression(e) && e.operator === t.SyntaxKind.ExclamationToken) {
      this.markCondition(e.operand);
    } else if (t.isBinaryExpression(e) && isLogical(t, e.operatorToken.kind)) {
      this.inCondition.add(e);
      this.markCondition(e.left);
      this.markCondition(e.right);
    }
  }

  private condition(expr: ts.Expression, kind: string): void {
    this.markCondition(expr);
    const v = this.taint(expr);
    if (v) this.report(expr, kind, v);
  }

  private find(node: ts.Node): void {
    const t = this.t;
    if (t.isIfStatement(node)) {
      this.markCondition(node.expression);
      const v = this.taint(node.expression);
      if (v && !(this.onlyThrows(node.thenStatement) && this.guardCondition(node.expression))) {
        this.report(node.expression, "if", v);
      }
    } else if (t.isConditionalExpression(node)) this.condition(node.condition, "?:");
    else if (t.isWhileStatement(node)) this.condition(node.expression, "while");
    else if (t.isDoStatement(node)) this.condition(node.expression, "do-while");
    else if (t.isForStatement(node) && node.condition) this.condition(node.condition, "for");
    else if (t.isForOfStatement(node) || t.isForInStatement(node)) {
      const v = this.taint(node.expression);
      // Iterating a shape runs rank times; anything else sized runs a size-dependent count.
      if (v && !(v.kind === "shape" && this.isShapeRead(node.expression))) {
        this.report(node.expression, t.isForOfStatement(node) ? "for-of" : "for-in", v);
      }
    } else if (t.isSwitchStatement(node)) {
      let v = this.taint(node.expression);
      for (const c of node.caseBlock.clauses) {
        if (t.isCaseClause(c)) v = this.taint(c.expression) ? join(v, this.taint(c.expression)) : v;
      }
      if (v) this.report(node.expression, "switch", v);
    } else if (t.isBinaryExpression(node) && isLogical(t, node.operatorToken.kind)) {
      if (!this.inCondition.has(node)) {
        const v = this.taint(node.left);
        if (v) this.report(node.left, node.operatorToken.getText(this.sf), v);
      }
    } else if (t.isElementAccessExpression(node) && !this.taint(node.expression)) {
      // `table[T % 2]`: choosing a value by a size is a branch too.
      const v = this.taint(node.argumentExpression);
      if (v && !this.isAssignedTo(node)) this.report(node.argumentExpression, "index", v);
    }
    t.forEachChild(node, (c) => this.find(c));
  }

  private isAssignedTo(node: ts.Node): boolean {
    const t = this.t;
    const p = node.parent;
    return t.isBinaryExpression(p) && p.left === node &&
      p.operatorToken.kind >= t.SyntaxKind.FirstAssignment &&
      p.operatorToken.kind <= t.SyntaxKind.LastAssignment;
  }
}

function isLogical(t: typeof ts, k: ts.SyntaxKind): boolean {
  return (
    k === t.SyntaxKind.AmpersandAmpersandToken ||
    k === t.SyntaxKind.BarBarToken ||
    k === t.SyntaxKind.QuestionQuestionToken ||
    k === t.SyntaxKind.AmpersandAmpersandEqualsToken ||
    k === t.SyntaxKind.BarBarEqualsToken ||
    k === t.SyntaxKind.QuestionQuestionEqualsToken
  );
}

function sameTaint(a: Taint | undefined, b: Taint | undefined): boolean {
  return a?.kind === b?.kind && a?.param === b?.param;
}
