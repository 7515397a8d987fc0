// The walk behind the source analysis (compiler/analyze.ts): one pass over a function's syntax
// tree that resolves every identifier to its declaration (TypeScript's checker, one file, no
// lib) and records free variables, side effects and likely graph breaks. Whether an expression
// is a Tensor is judged locally — declared types, Kiln calls, Tensor methods — because the
// analysis must be fast and must not type-check the user's whole program; the rules err on the
// side of saying nothing, so a report is worth reading, not a wall of maybes.

import type { ts } from "ts-morph";
import {
  AMBIGUOUS_MUTATING_METHODS,
  COERCING_FUNCTIONS,
  GLOBAL_CALLS,
  GLOBAL_NAMES,
  KILN_API_ROOTS,
  KILN_NON_TENSOR_FUNCTIONS,
  KILN_PACKAGE_NAMES,
  MUTATING_GLOBAL_FUNCTIONS,
  MUTATING_METHODS,
  NON_TENSOR_MEMBERS,
  SIDE_EFFECT_MODULES,
  VALUE_READ_METHODS,
  type CallRule,
  type SideEffectKind,
} from "./analyze_rules.ts";
import { tsApi, type ParsedFile } from "./analyze_source.ts";
import { fileUrlToPath, nodeModule } from "./node_builtins.ts";

/** Tensor properties whose writes the trace handles at run time (see `mutation`). */
const TENSOR_WRITES = new Set(["impl", "grad"]);

/** How a free variable is bound where it is declared. */
export type BindingKind =
  | "const"
  | "let"
  | "var"
  | "parameter"
  | "function"
  | "class"
  | "enum"
  | "import"
  | "catch"
  | "unresolved";

export interface FreeVariable {
  name: string;
  line: number;
  column: number;
  kind: "read" | "write";
  /** The declaration's kind; "unresolved" when no declaration was found in the parsed text. */
  binding: BindingKind;
  /**
   * Whether compile() should guard on the value: false for functions, classes, enums and
   * imports of Kiln's own API, whose values do not change what a traced graph computes.
   */
  guard: boolean;
  /** 1-based line of the declaration, when it is in the analysed file. */
  declaredAt?: number;
  /** For imports: the module specifier. */
  from?: string;
  /** Set when the entry comes from a different file than the analysis' `file`. */
  file?: string;
  /** The method (`this.hidden`) or module-level helper the entry was found in, if not the root. */
  via?: string;
}

export interface SideEffect {
  /** The call or assignment, as written (shortened to one line). */
  call: string;
  line: number;
  column: number;
  reason: string;
  kind: SideEffectKind;
  file?: string;
  via?: string;
}

export interface DataDependent {
  /** The expression, as written (shortened to one line). */
  expr: string;
  line: number;
  column: number;
  reason: string;
  file?: string;
  via?: string;
}

/** What one walk found. Positions are 1-based in the walked text (see `Positioner`). */
export interface WalkResult {
  freeVariables: FreeVariable[];
  sideEffects: SideEffect[];
  dataDependent: DataDependent[];
  /** Names of methods called as `this.name(...)`, for following into the same class. */
  thisCalls: string[];
  /** Names of methods called as `super.name(...)`, for following into the base class. */
  superCalls: string[];
  /**
   * Module-level functions of the same file called by name (`helper(x)`): followed, since
   * their free variables are module-level too and change what a trace computes.
   */
  helpers: { name: string; node: ts.Node }[];
}

/** Maps a node to the 1-based line and column reported for it. */
export type Positioner = (node: ts.Node) => { line: number; column: number };

let kilnRoot: string | undefined;

/** Whether an import specifier written in `file` names Kiln's own API. */
export function isKilnSpecifier(file: string, specifier: string): boolean {
  const pkg = specifier.split("/")[0]!;
  if (KILN_PACKAGE_NAMES.has(pkg)) return true;
  if (!specifier.startsWith(".") && !specifier.startsWith("/")) return false;
  const path = nodeModule("node:path");
  return path !== undefined && isKilnFile(path.resolve(path.dirname(file), specifier));
}

/**
 * Whether a path is part of Kiln's library (not its models, tests or examples). Without
 * node:path (not Node) nothing is: the analysis then reads more, never less.
 */
export function isKilnFile(file: string): boolean {
  const path = nodeModule("node:path");
  if (!path) return false;
  kilnRoot ??= path.resolve(path.dirname(fileUrlToPath(import.meta.url)), "..");
  const rel = path.relative(kilnRoot, file);
  if (rel.startsWith("..") || rel === "") return false;
  return KILN_API_ROOTS.has(rel.split(path.sep)[0]!);
}

/** Whether a specifier names one of Node's built-in modules (`node:fs`, `fs`). */
function isBuiltin(specifier: string): boolean {
  const m = nodeModule("node:module");
  return m ? m.isBuiltin(specifier) : specifier.startsWith("node:");
}

const ASSIGNMENT_OPERATORS = new Set<string>([
  "=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=", "|=", "^=", "&&=",
  "||=", "??=",
]);

// Operators that turn an object operand into a primitive (Symbol.toPrimitive for a Tensor).
const COERCING_OPERATORS = new Set<string>([
  "+", "-", "*", "/", "%", "**", "<", ">", "<=", ">=", "==", "!=", "&", "|", "^", "<<", ">>",
  ">>>",
]);

// How vitest/vite's module transform rewrites an imported binding's module object.
const TRANSFORMED_IMPORT = /^(__vi_import_\d+__|__vite_ssr_import_\d+__)$/;

function shorten(text: string): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length > 80 ? `${one.slice(0, 77)}...` : one;
}

interface Resolved {
  where: "local" | "global" | "free";
  binding?: BindingKind;
  decl?: ts.Declaration;
  from?: string;
}

/** Walks one function (or class) node of a parsed file. */
export class Walker {
  private readonly t = tsApi();
  private readonly sf: ts.SourceFile;
  private readonly checker: ts.TypeChecker;
  private readonly result: WalkResult = {
    freeVariables: [],
    sideEffects: [],
    dataDependent: [],
    thisCalls: [],
    superCalls: [],
    helpers: [],
  };
  private readonly tensorMemo = new Map<ts.Node, boolean>();

  constructor(
    private readonly parsed: ParsedFile,
    private readonly root: ts.Node,
    private readonly position: Positioner,
  ) {
    this.sf = parsed.sourceFile;
    this.checker = parsed.checker;
  }

  run(): WalkResult {
    const t = this.t;
    const root = this.root;
    // The root's own name and parameter names are declarations; its parameters' default
    // values and its body are code.
    t.forEachChild(root, (child) => {
      if (child === (root as { name?: ts.Node }).name) return;
      this.visit(child);
    });
    const byPos = <T extends { line: number; column: number }>(a: T, b: T): number =>
      a.line - b.line || a.column - b.column;
    this.result.freeVariables.sort(byPos);
    this.result.sideEffects.sort(byPos);
    this.result.dataDependent.sort(byPos);
    return this.result;
  }

  // ---- the walk

  private visit(node: ts.Node): void {
    const t = this.t;
    if (t.isExpressionWithTypeArguments(node)) {
      // `class X extends Base<T>`: Base is a value; `implements I` is only a type.
      const clause = node.parent;
      if (t.isHeritageClause(clause) && clause.token === t.SyntaxKind.ExtendsKeyword) {
        this.visit(node.expression);
      }
      return;
    }
    if (t.isTypeNode(node) || t.isTypeParameterDeclaration(node)) return;
    if (
      t.isInterfaceDeclaration(node) ||
      t.isTypeAliasDeclaration(node) ||
      t.isImportDeclaration(node) ||
      t.isExportDeclaration(node)
    ) {
      return;
    }
    if (t.isIdentifier(node)) {
      this.identifier(node);
      return;
    }
    if (t.isCallExpression(node) || t.isNewExpression(node)) this.call(node);
    else if (t.isBinaryExpression(node)) this.binary(node);
    else if (t.isPrefixUnaryExpression(node) || t.isPostfixUnaryExpression(node)) this.unary(node);
    else if (t.isDeleteExpression(node)) this.mutation(node.expression, node, "deletes");
    else if (t.isForInStatement(node) || t.isForOfStatement(node)) {
      if (!t.isVariableDeclarationList(node.initializer)) {
        this.assignmentTarget(node.initializer, node);
      }
    } else if (t.isAwaitExpression(node)) {
      this.sideEffect(node, "async", "awaits: compile() traces a synchronous call");
    } else if (t.isIfStatement(node) || t.isWhileStatement(node) || t.isDoStatement(node)) {
      this.condition(node.expression);
    } else if (t.isForStatement(node) && node.condition) this.condition(node.condition);
    else if (t.isConditionalExpression(node)) this.condition(node.condition);
    else if (t.isTemplateSpan(node) && this.isTensor(node.expression)) {
      this.dataDependent(
        node.expression,
        "a Tensor in a template literal is printed, which reads its values: a graph break",
      );
    } else if (t.isPropertyAccessExpression(node)) this.propertyRead(node);
    t.forEachChild(node, (child) => this.visit(child));
  }

  private identifier(id: ts.Identifier): void {
    if (!this.isReference(id)) return;
    const r = this.resolve(id);
    if (r.where !== "free") return;
    const p = id.parent;
    if (TRANSFORMED_IMPORT.test(id.text) && this.t.isPropertyAccessExpression(p)) {
      // Analysing toString() of test-runner output: `__vi_import_0__.relu` is the import `relu`.
      this.result.freeVariables.push({
        name: p.name.text,
        ...this.position(id),
        kind: "read",
        binding: "import",
        guard: true,
      });
      return;
    }
    const write = this.isAssignmentTarget(id);
    this.freeVariable(id, r, write ? "write" : "read");
    if (write) {
      const expr = this.enclosingWrite(id);
      this.sideEffect(
        expr,
        "assignment",
        `assigns \`${id.text}\`, a variable declared outside the function: ` +
          "compiled code does not repeat the assignment",
      );
    }
  }

  private freeVariable(id: ts.Identifier, r: Resolved, kind: "read" | "write"): void {
    const binding = r.binding ?? "unresolved";
    const entry: FreeVariable = {
      name: id.text,
      ...this.position(id),
      kind,
      binding,
      guard: this.guardWorthy(r),
    };
    if (r.decl && r.decl.getSourceFile() === this.sf) {
      const p = this.sf.getLineAndCharacterOfPosition(r.decl.getStart(this.sf));
      if (this.parsed.file.startsWith("/__kiln_snippet__/")) {
        // A declaration in the snippet (an enclosing function's parameter) has no file line.
      } else entry.declaredAt = p.line + 1;
    }
    if (r.from !== undefined) entry.from = r.from;
    this.result.freeVariables.push(entry);
  }

  private guardWorthy(r: Resolved): boolean {
    const t = this.t;
    switch (r.binding) {
      case "function":
      case "class":
      case "enum":
        return false;
      case "import":
        // Kiln's API and Node's built-in modules are code, not state.
        return !(
          r.from !== undefined &&
          (isKilnSpecifier(this.parsed.file, r.from) || isBuiltin(r.from))
        );
      case "const": {
        // A const bound to a function or to a primitive literal can never change.
        const init =
          r.decl && t.isVariableDeclaration(r.decl) ? r.decl.initializer : undefined;
        const inner = init && this.skipOuter(init);
        return !(
          inner &&
          (t.isArrowFunction(inner) ||
            t.isFunctionExpression(inner) ||
            t.isClassExpression(inner) ||
            isPrimitiveLiteral(t, inner))
        );
      }
      case "let":
      case "var":
      case "parameter":
      case "catch":
      case "unresolved":
      case undefined:
        return true;
      default: {
        const never: never = r.binding;
        return never;
      }
    }
  }

  /** Whether an identifier stands for a variable here (not a property name, label, type...). */
  private isReference(id: ts.Identifier): boolean {
    const t = this.t;
    const p = id.parent;
    if (t.isPropertyAccessExpression(p)) return p.expression === id;
    if (t.isQualifiedName(p)) return false;
    if (t.isShorthandPropertyAssignment(p)) return true;
    if (t.isBindingElement(p)) return p.name !== id && p.propertyName !== id;
    if (
      t.isPropertyAssignment(p) ||
      t.isPropertyDeclaration(p) ||
      t.isMethodDeclaration(p) ||
      t.isGetAccessorDeclaration(p) ||
      t.isSetAccessorDeclaration(p) ||
      t.isEnumMember(p) ||
      t.isPropertySignature(p) ||
      t.isMethodSignature(p)
    ) {
      return p.name !== id;
    }
    if (
      t.isVariableDeclaration(p) ||
      t.isParameter(p) ||
      t.isFunctionDeclaration(p) ||
      t.isFunctionExpression(p) ||
      t.isClassDeclaration(p) ||
      t.isClassExpression(p) ||
      t.isEnumDeclaration(p) ||
      t.isModuleDeclaration(p)
    ) {
      return p.name !== id;
    }
    if (t.isLabeledStatement(p) || t.isBreakStatement(p) || t.isContinueStatement(p)) {
      return false;
    }
    if (t.isMetaProperty(p) || t.isImportSpecifier(p) || t.isExportSpecifier(p)) return false;
    if (t.isImportClause(p) || t.isNamespaceImport(p)) return false;
    return true;
  }

  private resolve(id: ts.Identifier): Resolved {
    const t = this.t;
    const symbol = t.isShorthandPropertyAssignment(id.parent)
      ? this.checker.getShorthandAssignmentValueSymbol(id.parent)
      : this.checker.getSymbolAtLocation(id);
    const decl = symbol?.declarations?.[0];
    if (!decl || decl.getSourceFile() !== this.sf) {
      if (GLOBAL_NAMES.has(id.text)) return { where: "global" };
      return { where: "free", binding: "unresolved" };
    }
    if (decl.pos >= this.root.pos && decl.end <= this.root.end) return { where: "local", decl };
    return { where: "free", decl, ...this.bindingOf(decl) };
  }

  private bindingOf(decl: ts.Declaration): Omit<Resolved, "where" | "decl"> {
    const t = this.t;
    let d: ts.Node = decl;
    while (t.isBindingElement(d)) d = d.parent.parent;
    if (t.isVariableDeclaration(d)) {
      if (t.isCatchClause(d.parent)) return { binding: "catch" };
      const flags = t.isVariableDeclarationList(d.parent) ? d.parent.flags : 0;
      if (flags & t.NodeFlags.Const) return { binding: "const" };
      if (flags & t.NodeFlags.Let) return { binding: "let" };
      return { binding: "var" };
    }
    if (t.isParameter(d)) return { binding: "parameter" };
    if (t.isFunctionDeclaration(d) || t.isFunctionExpression(d)) return { binding: "function" };
    if (t.isClassDeclaration(d) || t.isClassExpression(d)) return { binding: "class" };
    if (t.isEnumDeclaration(d)) return { binding: "enum" };
    if (t.isImportSpecifier(d) || t.isImportClause(d) || t.isNamespaceImport(d)) {
      let n: ts.Node = d;
      while (!t.isImportDeclaration(n) && n.parent) n = n.parent;
      const from =
        t.isImportDeclaration(n) && t.isStringLiteral(n.moduleSpecifier)
          ? n.moduleSpecifier.text
          : undefined;
      return from === undefined ? { binding: "import" } : { binding: "import", from };
    }
    return { binding: "unresolved" };
  }

  // ---- writes

  /** Whether `node` is written by an assignment, ++/--, for-in/of or destructuring. */
  private isAssignmentTarget(node: ts.Node): boolean {
    const t = this.t;
    let n: ts.Node = node;
    let viaPattern = false;
    for (;;) {
      const p = n.parent;
      if (t.isParenthesizedExpression(p) || t.isNonNullExpression(p)) n = p;
      else if (t.isArrayLiteralExpression(p) || t.isSpreadElement(p) || t.isSpreadAssignment(p)) {
        viaPattern = true;
        n = p;
      } else if (t.isShorthandPropertyAssignment(p) && p.name === n) {
        viaPattern = true;
        n = p.parent;
      } else if (t.isPropertyAssignment(p) && p.initializer === n) {
        viaPattern = true;
        n = p.parent;
      } else if (t.isBinaryExpression(p) && p.left === n) {
        const op = t.tokenToString(p.operatorToken.kind) ?? "";
        if (!ASSIGNMENT_OPERATORS.has(op)) return false;
        if (!viaPattern) return true;
        // `[a = 1] = xs`: a default inside a pattern is itself a target, then continue out.
        if (op === "=" && (t.isArrayLiteralExpression(p.parent) || isPropInit(t, p))) {
          n = p;
          continue;
        }
        return op === "=";
      } else if (
        (t.isPrefixUnaryExpression(p) || t.isPostfixUnaryExpression(p)) &&
        (p.operator === t.SyntaxKind.PlusPlusToken || p.operator === t.SyntaxKind.MinusMinusToken)
      ) {
        return !viaPattern;
      } else if ((t.isForInStatement(p) || t.isForOfStatement(p)) && p.initializer === n) {
        return true;
      } else return false;
    }
  }

  /** The whole assignment expression around a written node, for messages. */
  private enclosingWrite(node: ts.Node): ts.Node {
    const t = this.t;
    let n: ts.Node = node;
    while (n.parent && !t.isStatement(n.parent) && !t.isBlock(n.parent)) {
      const p = n.parent;
      if (
        (t.isBinaryExpression(p) &&
          ASSIGNMENT_OPERATORS.has(t.tokenToString(p.operatorToken.kind) ?? "")) ||
        t.isPrefixUnaryExpression(p) ||
        t.isPostfixUnaryExpression(p)
      ) {
        n = p;
        if (!t.isArrayLiteralExpression(p.parent) && !t.isObjectLiteralExpression(p.parent)) {
          break;
        }
      } else if (t.isForInStatement(p) || t.isForOfStatement(p)) return n;
      else n = p;
    }
    return n;
  }

  private binary(node: ts.BinaryExpression): void {
    const t = this.t;
    const op = t.tokenToString(node.operatorToken.kind) ?? "";
    if (ASSIGNMENT_OPERATORS.has(op)) {
      this.assignmentTarget(node.left, node);
      return;
    }
    if (COERCING_OPERATORS.has(op)) {
      // `t == null` compares without converting t.
      if ((op === "==" || op === "!=") && (isNullish(t, node.left) || isNullish(t, node.right))) {
        return;
      }
      const tensorSide = [node.left, node.right].find((e) => this.isTensor(e));
      if (tensorSide) {
        this.dataDependent(
          node,
          `\`${op}\` on a Tensor turns it into a JavaScript value, which ` +
            "reads its values: a graph break (use the tensor op instead)",
        );
      }
    }
  }

  private unary(node: ts.PrefixUnaryExpression | ts.PostfixUnaryExpression): void {
    const t = this.t;
    const op = node.operator;
    if (op === t.SyntaxKind.PlusPlusToken || op === t.SyntaxKind.MinusMinusToken) {
      this.assignmentTarget(node.operand, node);
      return;
    }
    if (
      (op === t.SyntaxKind.PlusToken ||
        op === t.SyntaxKind.MinusToken ||
        op === t.SyntaxKind.TildeToken) &&
      this.isTensor(node.operand)
    ) {
      this.dataDependent(
        node,
        "a unary operator on a Tensor turns it into a number, which reads its values: " +
          "a graph break",
      );
    }
  }

  /** An assignment to `target` (identifier targets are handled when the identifier is seen). */
  private assignmentTarget(target: ts.Expression, whole: ts.Node): void {
    const t = this.t;
    const e = this.skipOuter(target);
    if (t.isPropertyAccessExpression(e) || t.isElementAccessExpression(e)) {
      this.mutation(e, whole, "assigns");
    } else if (t.isArrayLiteralExpression(e) || t.isObjectLiteralExpression(e)) {
      const visitPattern = (n: ts.Node): void => {
        if (t.isPropertyAccessExpression(n) || t.isElementAccessExpression(n)) {
          this.mutation(n, whole, "assigns");
          return;
        }
        if (t.isPropertyAssignment(n)) {
          visitPattern(n.initializer);
          return;
        }
        if (t.isBinaryExpression(n)) {
          visitPattern(n.left);
          return;
        }
        t.forEachChild(n, visitPattern);
      };
      t.forEachChild(e, visitPattern);
    }
  }

  /** A write (`assigns` / `deletes`) to a property of the object `target` reaches. */
  private mutation(target: ts.Expression, whole: ts.Node, verb: string): void {
    const t = this.t;
    const e = this.skipOuter(target);
    if (!t.isPropertyAccessExpression(e) && !t.isElementAccessExpression(e)) return;
    // A tensor's value or gradient (`p.impl = ...`, `p.grad = ...`, what optimizers and
    // backward() do): the trace sees these at run time and makes them program outputs, or
    // names the tensor it cannot (compiler/trace.ts).
    if (verb === "assigns" && t.isPropertyAccessExpression(e) && TENSOR_WRITES.has(e.name.text)) {
      return;
    }
    const owner = this.ownerOf(e.expression);
    if (!owner) return;
    this.sideEffect(
      whole,
      "mutation",
      `${verb} \`${shorten(e.getText(this.sf))}\`: ${owner}; compiled code does not repeat ` +
        "the write",
    );
  }

  /**
   * Says whose object an expression reaches when it is not the function's own (a free
   * variable, a global, an argument, `this`); undefined for a local object.
   */
  private ownerOf(expr: ts.Expression): string | undefined {
    const t = this.t;
    let e: ts.Expression = this.skipOuter(expr);
    while (
      t.isPropertyAccessExpression(e) ||
      t.isElementAccessExpression(e) ||
      t.isCallExpression(e)
    ) {
      e = this.skipOuter(e.expression);
    }
    if (e.kind === t.SyntaxKind.ThisKeyword) {
      return "state of the module (or object) the method runs on";
    }
    if (!t.isIdentifier(e)) return undefined;
    const r = this.resolve(e);
    if (r.where === "global") return `\`${e.text}\` is a global`;
    if (r.where === "free") return `\`${e.text}\` is declared outside the function`;
    if (r.decl && this.isRootParameter(r.decl)) {
      return `\`${e.text}\` is an argument (the caller's object)`;
    }
    return undefined;
  }

  private isRootParameter(decl: ts.Node): boolean {
    const t = this.t;
    let d: ts.Node = decl;
    while (t.isBindingElement(d)) d = d.parent.parent;
    return t.isParameter(d) && d.parent === this.root;
  }

  private propertyRead(node: ts.PropertyAccessExpression): void {
    const t = this.t;
    if (!t.isIdentifier(node.expression) || node.expression.text !== "process") return;
    if (node.name.text !== "env" && node.name.text !== "argv") return;
    if (this.resolve(node.expression).where !== "global") return;
    if (this.isAssignmentTarget(node)) return;
    const p = node.parent;
    const whole = t.isPropertyAccessExpression(p) || t.isElementAccessExpression(p) ? p : node;
    this.sideEffect(
      whole,
      "process",
      `reads process.${node.name.text}: not guarded, so compiled code keeps the value seen ` +
        "when it was traced",
    );
  }

  // ---- calls

  private call(node: ts.CallExpression | ts.NewExpression): void {
    const t = this.t;
    const callee = this.skipOuter(node.expression);
    const path = this.calleePath(callee);
    const args = node.arguments ?? [];
    if (t.isPropertyAccessExpression(callee)) {
      this.methodCall(node, callee, callee.name.text, args);
      if (callee.expression.kind === t.SyntaxKind.SuperKeyword) {
        this.result.superCalls.push(callee.name.text);
      }
    }
    if (path) {
      const [root, ...members] = path.parts;
      const dotted = path.parts.join(".");
      // `this.helper(x)`: followed into the class by analyzeModuleForward.
      if (root === "this" && members.length === 1) this.result.thisCalls.push(members[0]!);
      if (members.length === 0 && t.isIdentifier(path.root)) this.helperCall(path.root);
      const rule = this.callRule(node, path.root, root!, members);
      if (rule) this.sideEffect(node, rule.kind, `${dotted}: ${rule.reason}`);
      if (rule?.kind === "print" && args.some((a) => this.isTensor(a))) {
        this.dataDependent(node, "printing a Tensor reads its values: a graph break");
      }
      const r = t.isIdentifier(path.root) ? this.resolve(path.root) : undefined;
      if (r?.where === "global" && MUTATING_GLOBAL_FUNCTIONS.has(dotted) && args[0]) {
        const owner = this.ownerOf(args[0]);
        if (owner) {
          const what = shorten(args[0].getText(this.sf));
          this.sideEffect(node, "mutation", `${dotted} mutates \`${what}\`: ${owner}`);
        }
      }
      if (r?.where === "global" && this.isCoercing(dotted) && !GLOBAL_CALLS.has(dotted)) {
        const arg = args.find((a) => this.isTensor(a));
        if (arg) {
          this.dataDependent(
            node,
            `${dotted}() turns a Tensor into a JavaScript value, which reads its values: ` +
              "a graph break",
          );
        }
      }
    }
  }

  /** A call of a module-level function of this file, by name: noted for following. */
  private helperCall(id: ts.Identifier): void {
    const t = this.t;
    const r = this.resolve(id);
    if (r.where !== "free" || !r.decl) return;
    const d = r.decl;
    let fnNode: ts.Node | undefined;
    let statement: ts.Node = d;
    if (t.isFunctionDeclaration(d) && d.body) fnNode = d;
    else if (t.isVariableDeclaration(d) && r.binding === "const" && d.initializer) {
      const init = this.skipOuter(d.initializer);
      if (t.isArrowFunction(init) || t.isFunctionExpression(init)) fnNode = init;
      statement = d.parent.parent;
    }
    if (fnNode && t.isSourceFile(statement.parent)) {
      this.result.helpers.push({ name: id.text, node: fnNode });
    }
  }

  private methodCall(
    node: ts.CallExpression | ts.NewExpression,
    callee: ts.PropertyAccessExpression,
    method: string,
    args: readonly ts.Expression[],
  ): void {
    const t = this.t;
    if (!t.isCallExpression(node)) return;
    const read = VALUE_READ_METHODS.get(method);
    if (read !== undefined) {
      this.dataDependent(node, read);
      return;
    }
    if (method === "toString" && args.length === 0 && this.isTensor(callee.expression)) {
      this.dataDependent(node, "toString() on a Tensor reads its values: a graph break");
      return;
    }
    const mutating =
      MUTATING_METHODS.has(method) ||
      (AMBIGUOUS_MUTATING_METHODS.has(method) && this.isCollection(callee.expression));
    if (!mutating) return;
    const owner = this.ownerOf(callee.expression);
    if (owner) {
      const what = shorten(callee.expression.getText(this.sf));
      this.sideEffect(
        node,
        "mutation",
        `${method}() mutates \`${what}\`: ${owner}; compiled code does not repeat it`,
      );
    }
  }

  private callRule(
    node: ts.CallExpression | ts.NewExpression,
    rootNode: ts.Node,
    root: string,
    members: string[],
  ): CallRule | undefined {
    const t = this.t;
    if (!t.isIdentifier(rootNode)) return undefined;
    const r = this.resolve(rootNode);
    if (r.where === "global") {
      if (root === "process" && members[0] === "env") return undefined;
      if (t.isNewExpression(node)) {
        const noArgs = (node.arguments?.length ?? 0) === 0;
        return root === "Date" && members.length === 0 && noArgs
          ? GLOBAL_CALLS.get("Date")
          : undefined;
      }
      const dotted = [root, ...members].join(".");
      if (root === "Date" && members.length > 0 && dotted !== "Date.now") return undefined;
      return GLOBAL_CALLS.get(dotted) ?? GLOBAL_CALLS.get(`${root}.*`);
    }
    if (r.where === "free" && r.binding === "import" && r.from !== undefined) {
      return SIDE_EFFECT_MODULES.get(r.from);
    }
    return undefined;
  }

  private isCoercing(dotted: string): boolean {
    if (COERCING_FUNCTIONS.has(dotted)) return true;
    const root = dotted.split(".")[0];
    return COERCING_FUNCTIONS.has(`${root}.*`) && dotted !== root;
  }

  /** `a.b.c` as its parts, with the node of its root (an identifier or `this`). */
  private calleePath(e: ts.Expression): { root: ts.Node; parts: string[] } | undefined {
    const t = this.t;
    const parts: string[] = [];
    let n: ts.Expression = e;
    for (;;) {
      if (t.isPropertyAccessExpression(n)) {
        parts.unshift(n.name.text);
        n = this.skipOuter(n.expression);
      } else if (t.isElementAccessExpression(n) && t.isStringLiteral(n.argumentExpression)) {
        parts.unshift(n.argumentExpression.text);
        n = this.skipOuter(n.expression);
      } else break;
    }
    if (t.isIdentifier(n)) return { root: n, parts: [n.text, ...parts] };
    if (n.kind === t.SyntaxKind.ThisKeyword) return { root: n, parts: ["this", ...parts] };
    return undefined;
  }

  // ---- conditions and tensor-ness

  private condition(expr: ts.Expression): void {
    const t = this.t;
    const e = this.skipOuter(expr);
    if (t.isPrefixUnaryExpression(e) && e.operator === t.SyntaxKind.ExclamationToken) {
      this.condition(e.operand);
      return;
    }
    if (t.isBinaryExpression(e)) {
      const k = e.operatorToken.kind;
      if (
        k === t.SyntaxKind.AmpersandAmpersandToken ||
        k === t.SyntaxKind.BarBarToken ||
        k === t.SyntaxKind.QuestionQuestionToken
      ) {
        this.condition(e.left);
        this.condition(e.right);
        return;
      }
    }
    if (this.isTensor(e) && !this.mayBeAbsent(e)) {
      this.dataDependent(
        e,
        "a Tensor used as a condition is always truthy in JavaScript (it is an object); " +
          "branching on its value needs item(), a graph break",
      );
    }
  }

  /** `if (mask)` on an optional Tensor is a presence check, not a read of its values. */
  private mayBeAbsent(e: ts.Expression): boolean {
    const t = this.t;
    if (!t.isIdentifier(e)) return false;
    const d = this.resolve(e).decl;
    if (!d || !(t.isParameter(d) || t.isVariableDeclaration(d) || t.isPropertyDeclaration(d))) {
      return false;
    }
    if ((t.isParameter(d) || t.isPropertyDeclaration(d)) && d.questionToken) return true;
    const type = d.type;
    return (
      type !== undefined &&
      t.isUnionTypeNode(type) &&
      type.types.some(
        (u) =>
          u.kind === t.SyntaxKind.UndefinedKeyword ||
          (t.isLiteralTypeNode(u) && u.literal.kind === t.SyntaxKind.NullKeyword),
      )
    );
  }

  private skipOuter(e: ts.Expression): ts.Expression {
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

  /** Whether an expression is (by its declaration or how it is made) a Tensor. */
  private isTensor(expr: ts.Expression): boolean {
    const e = this.skipOuter(expr);
    const memo = this.tensorMemo.get(e);
    if (memo !== undefined) return memo;
    this.tensorMemo.set(e, false); // cycles (`let x = f(x)`) answer no
    const v = this.computeIsTensor(e);
    this.tensorMemo.set(e, v);
    return v;
  }

  private computeIsTensor(e: ts.Expression): boolean {
    const t = this.t;
    if (t.isIdentifier(e)) {
      const r = this.resolve(e);
      return r.decl !== undefined && this.declaresTensor(r.decl);
    }
    if (t.isConditionalExpression(e)) {
      return this.isTensor(e.whenTrue) || this.isTensor(e.whenFalse);
    }
    if (t.isPropertyAccessExpression(e)) {
      const name = e.name.text;
      if (name === "mT" || name === "T") return this.isTensor(e.expression);
      if (e.expression.kind === t.SyntaxKind.ThisKeyword) return this.classMemberIsTensor(name);
      return false;
    }
    if (t.isNewExpression(e)) {
      const name = lastName(t, e.expression);
      return this.isKilnValue(e.expression) && (name === "Tensor" || name === "Parameter");
    }
    if (!t.isCallExpression(e)) return false;
    const callee = this.skipOuter(e.expression);
    if (t.isIdentifier(callee)) {
      return this.isKilnValue(callee) && isTensorFunctionName(callee.text);
    }
    if (!t.isPropertyAccessExpression(callee)) return false;
    const method = callee.name.text;
    if (NON_TENSOR_MEMBERS.has(method)) return false;
    const recv = this.skipOuter(callee.expression);
    if (this.isTensor(recv)) return true;
    if (this.isKilnValue(recv)) return isTensorFunctionName(method);
    // A submodule or helper on `this` given a tensor: a module call returns a tensor.
    const base = this.calleePath(recv);
    if (base?.parts[0] === "this" || recv.kind === t.SyntaxKind.ThisKeyword) {
      return e.arguments.some((a) => this.isTensor(a));
    }
    return false;
  }

  /** An identifier, or a member of one, bound to an import of Kiln's API. */
  private isKilnValue(e: ts.Expression): boolean {
    const path = this.calleePath(this.skipOuter(e));
    if (!path || !this.t.isIdentifier(path.root)) return false;
    const r = this.resolve(path.root);
    return (
      r.binding === "import" && r.from !== undefined && isKilnSpecifier(this.parsed.file, r.from)
    );
  }

  private declaresTensor(decl: ts.Declaration): boolean {
    const t = this.t;
    if (t.isParameter(decl) || t.isVariableDeclaration(decl) || t.isPropertyDeclaration(decl)) {
      if (decl.type) return isTensorType(t, decl.type);
      return decl.initializer !== undefined && this.isTensor(decl.initializer);
    }
    return false;
  }

  /** `this.name` in a method: declared in the class as a Tensor, or assigned one. */
  private classMemberIsTensor(name: string): boolean {
    const t = this.t;
    let c: ts.Node | undefined = this.root.parent;
    while (c && !t.isClassDeclaration(c) && !t.isClassExpression(c)) c = c.parent;
    if (!c || !(t.isClassDeclaration(c) || t.isClassExpression(c))) return false;
    for (const m of c.members) {
      if (t.isPropertyDeclaration(m) && t.isIdentifier(m.name) && m.name.text === name) {
        return this.declaresTensor(m);
      }
    }
    const ctor = c.members.find(t.isConstructorDeclaration);
    let found = false;
    const visit = (n: ts.Node): void => {
      if (found) return;
      if (
        t.isBinaryExpression(n) &&
        n.operatorToken.kind === t.SyntaxKind.EqualsToken &&
        t.isPropertyAccessExpression(n.left) &&
        n.left.expression.kind === t.SyntaxKind.ThisKeyword &&
        n.left.name.text === name
      ) {
        found = this.isTensor(n.right);
      }
      t.forEachChild(n, visit);
    };
    if (ctor?.body) visit(ctor.body);
    return found;
  }

  /** Declared (by type or initializer) as an Array, Set or Map. */
  private isCollection(expr: ts.Expression): boolean {
    const t = this.t;
    const e = this.skipOuter(expr);
    if (!t.isIdentifier(e)) return false;
    const d = this.resolve(e).decl;
    if (!d || !(t.isVariableDeclaration(d) || t.isParameter(d))) return false;
    if (d.type) {
      if (t.isArrayTypeNode(d.type)) return true;
      return (
        t.isTypeReferenceNode(d.type) &&
        /^(Array|Set|Map)$/.test(d.type.typeName.getText(this.sf))
      );
    }
    const init = d.initializer && this.skipOuter(d.initializer);
    if (!init) return false;
    if (t.isArrayLiteralExpression(init)) return true;
    return (
      t.isNewExpression(init) &&
      t.isIdentifier(init.expression) &&
      /^(Array|Set|Map)$/.test(init.expression.text)
    );
  }

  // ---- recording

  private sideEffect(node: ts.Node, kind: SideEffectKind, reason: string): void {
    this.result.sideEffects.push({
      call: shorten(node.getText(this.sf)),
      ...this.position(node),
      reason,
      kind,
    });
  }

  private dataDependent(node: ts.Node, reason: string): void {
    this.result.dataDependent.push({
      expr: shorten(node.getText(this.sf)),
      ...this.position(node),
      reason,
    });
  }
}

function isNullish(t: typeof ts, e: ts.Expression): boolean {
  return e.kind === t.SyntaxKind.NullKeyword || (t.isIdentifier(e) && e.text === "undefined");
}

function isPrimitiveLiteral(t: typeof ts, e: ts.Expression): boolean {
  if (t.isPrefixUnaryExpression(e) && e.operator === t.SyntaxKind.MinusToken) {
    return t.isNumericLiteral(e.operand) || t.isBigIntLiteral(e.operand);
  }
  return (
    t.isNumericLiteral(e) ||
    t.isBigIntLiteral(e) ||
    t.isStringLiteral(e) ||
    t.isNoSubstitutionTemplateLiteral(e) ||
    e.kind === t.SyntaxKind.TrueKeyword ||
    e.kind === t.SyntaxKind.FalseKeyword ||
    e.kind === t.SyntaxKind.NullKeyword
  );
}

function isPropInit(t: typeof ts, p: ts.BinaryExpression): boolean {
  return t.isPropertyAssignment(p.parent) && p.parent.initializer === p;
}

function lastName(t: typeof ts, e: ts.Expression): string {
  if (t.isIdentifier(e)) return e.text;
  if (t.isPropertyAccessExpression(e)) return e.name.text;
  return "";
}

function isTensorFunctionName(name: string): boolean {
  return !KILN_NON_TENSOR_FUNCTIONS.has(name) && /^[a-z]/.test(name);
}

/** `Tensor`, `Parameter`, `kiln.Tensor`, or a union with one of them (not `Tensor[]`). */
function isTensorType(t: typeof ts, type: ts.TypeNode): boolean {
  if (t.isUnionTypeNode(type)) return type.types.some((u) => isTensorType(t, u));
  if (t.isParenthesizedTypeNode(type)) return isTensorType(t, type.type);
  if (!t.isTypeReferenceNode(type)) return false;
  const name = t.isIdentifier(type.typeName) ? type.typeName.text : type.typeName.right.text;
  return name === "Tensor" || name === "Parameter";
}
