// Parsing for the source analysis (compiler/analyze.ts): ts-morph projects (one per file, with
// no lib and no module resolution — only the file's own scopes matter), the syntax node of a
// live function inside its original file, and the fallback parse of `fn.toString()`. ts-morph
// pulls in its own TypeScript (a quarter of a second to load), so it is loaded on first use:
// programs that never call compile() never pay for it.

import type { Project, ts } from "ts-morph";
import { loadTsMorph } from "./ts_morph.ts";

type Ts = typeof ts;

export { loadTsMorph };

/** The TypeScript compiler API bundled with ts-morph. */
export function tsApi(): Ts {
  return loadTsMorph().ts;
}

/** A parsed file with a type checker that resolves names to their declarations. */
export interface ParsedFile {
  file: string;
  text: string;
  project: Project;
  sourceFile: ts.SourceFile;
  checker: ts.TypeChecker;
}

const parsedFiles = new Map<string, ParsedFile>();

function newProject(): Project {
  const { Project } = loadTsMorph();
  const t = tsApi();
  return new Project({
    useInMemoryFileSystem: true,
    skipFileDependencyResolution: true,
    compilerOptions: {
      noLib: true,
      noResolve: true,
      allowJs: true,
      types: [],
      target: t.ScriptTarget.ES2022,
      module: t.ModuleKind.ESNext,
    },
  });
}

/** Parses `text` as `file` (cached while the text is the same). */
export function parseFile(file: string, text: string): ParsedFile {
  const cached = parsedFiles.get(file);
  if (cached && cached.text === text) return cached;
  const project = newProject();
  const sf = project.createSourceFile(virtualPath(file), text, { overwrite: true });
  const parsed: ParsedFile = {
    file,
    text,
    project,
    sourceFile: sf.compilerNode,
    checker: project.getTypeChecker().compilerObject,
  };
  parsedFiles.set(file, parsed);
  return parsed;
}

/** ts-morph's in-memory file system wants a path whose extension says how to parse it. */
function virtualPath(file: string): string {
  const base = file.startsWith("/") ? file : `/${file}`;
  return /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/.test(base) ? base : `${base}.ts`;
}

/** Syntax errors of a parsed snippet (public API: the program's syntactic diagnostics). */
function hasSyntaxErrors(project: Project, sf: ts.SourceFile): boolean {
  return project.getProgram().compilerObject.getSyntacticDiagnostics(sf).length > 0;
}

/** Function-like nodes (and classes), the things a live Function object can come from. */
export function isFunctionLike(node: ts.Node): boolean {
  const t = tsApi();
  return (
    t.isFunctionDeclaration(node) ||
    t.isFunctionExpression(node) ||
    t.isArrowFunction(node) ||
    t.isMethodDeclaration(node) ||
    t.isConstructorDeclaration(node) ||
    t.isGetAccessorDeclaration(node) ||
    t.isSetAccessorDeclaration(node) ||
    t.isClassDeclaration(node) ||
    t.isClassExpression(node)
  );
}

function isClassNode(node: ts.Node): boolean {
  const t = tsApi();
  return t.isClassDeclaration(node) || t.isClassExpression(node);
}

/**
 * What a function looks like, independent of types, formatting and local names: its number of
 * parameters and the identifiers of its parameters and body in order, with property names
 * kept and every other name replaced by the order of its first appearance (esbuild renames a
 * parameter that shadows a module-level name, `x` → `x2`). Compared between the live
 * function's `toString()` and candidate nodes of the .ts file, it picks the right node even
 * where the position from V8 is approximate or missing.
 */
export interface Shape {
  isClass: boolean;
  arity: number;
  ids: string[];
}

// Names module transforms introduce: the test runner's (`__vi_import_0__.relu`), esbuild's
// CommonJS form under tsx (`import_args.parseArgs`), and esbuild's keepNames wrapper
// (`__name(() => ..., "fail")`, whose string is not an identifier).
const TRANSFORM_NAME = /^(__vi_|__vite_ssr_|_vi_|import_[\w$]+$|__name$)/;

export function shapeOf(node: ts.Node): Shape {
  const t = tsApi();
  const ids: string[] = [];
  const canonical = new Map<string, string>();
  const name = (text: string): void => {
    let c = canonical.get(text);
    if (c === undefined) {
      c = `#${canonical.size}`;
      canonical.set(text, c);
    }
    ids.push(c);
  };
  let arity = 0;
  const addBinding = (b: ts.BindingName): void => {
    if (t.isIdentifier(b)) name(b.text);
    else for (const el of b.elements) if (!t.isOmittedExpression(el)) addBinding(el.name);
  };
  if (!isClassNode(node) && "parameters" in node) {
    for (const p of (node as ts.SignatureDeclarationBase).parameters) {
      if (t.isIdentifier(p.name) && p.name.text === "this") continue;
      arity++;
      addBinding(p.name);
    }
  }
  const visit = (n: ts.Node): void => {
    if (t.isTypeNode(n) && !t.isExpressionWithTypeArguments(n)) return;
    if (t.isInterfaceDeclaration(n) || t.isTypeAliasDeclaration(n)) return;
    if (t.isParameter(n) && n.parent === node) {
      if (n.initializer) visit(n.initializer);
      return;
    }
    if (t.isPropertyAccessExpression(n)) {
      const e = n.expression;
      if (t.isIdentifier(e) && TRANSFORM_NAME.test(e.text)) {
        name(n.name.text); // `__vi_import_0__.relu` is the import `relu`
        return;
      }
      visit(e);
      ids.push(`.${n.name.text}`);
      return;
    }
    if (t.isIdentifier(n)) {
      if (!TRANSFORM_NAME.test(n.text)) name(n.text);
      return;
    }
    t.forEachChild(n, visit);
  };
  t.forEachChild(node, visit);
  return { isClass: isClassNode(node), arity, ids };
}

/** How alike two shapes are: 1 for the same identifiers in the same order. */
export function similarity(a: Shape, b: Shape): number {
  if (a.isClass !== b.isClass || a.arity !== b.arity) return 0;
  const n = a.ids.length;
  const m = b.ids.length;
  if (n === 0 && m === 0) return 1;
  // Longest common subsequence, two rows.
  let prev = new Array<number>(m + 1).fill(0);
  let cur = new Array<number>(m + 1).fill(0);
  for (let i = 1; i <= n; i++) {
    for (let j = 1; j <= m; j++) {
      cur[j] = a.ids[i - 1] === b.ids[j - 1] ? prev[j - 1]! + 1 : Math.max(prev[j]!, cur[j - 1]!);
    }
    [prev, cur] = [cur, prev];
  }
  return prev[m]! / Math.max(n, m);
}

/** A parse of `fn.toString()`: the snippet and the node of the function within it. */
export interface SnippetParse {
  parsed: ParsedFile;
  node: ts.Node;
  /** Characters the wrapper put before the function's text. */
  prefix: number;
  source: string;
}

let snippetCount = 0;

/**
 * Parses the JavaScript `fn.toString()` returns. A method's text (`forward(x) { ... }`) is not
 * an expression, so it is tried inside an object literal and a class body too.
 */
export function parseFunctionText(fn: Function): SnippetParse | undefined {
  let source: string;
  try {
    source = Function.prototype.toString.call(fn);
  } catch {
    return undefined;
  }
  return parseFunctionSource(source);
}

/** `parseFunctionText` of a function's text (what `Function.prototype.toString` gave). */
export function parseFunctionSource(source: string): SnippetParse | undefined {
  if (/\{\s*\[native code\]\s*\}\s*$/.test(source)) return undefined;
  const wrappers: [string, string][] = [
    ["(", "\n)"],
    ["({", "\n})"],
    ["(class {", "\n})"],
  ];
  for (const [open, close] of wrappers) {
    const name = `/__kiln_snippet__/${++snippetCount}.js`;
    const parsed = parseFile(name, `${open}${source}${close}`);
    parsedFiles.delete(name);
    if (hasSyntaxErrors(parsed.project, parsed.sourceFile)) continue;
    let found: ts.Node | undefined;
    const visit = (n: ts.Node): void => {
      if (found) return;
      if (isFunctionLike(n) && n.getStart(parsed.sourceFile) >= open.length - 1) {
        found = n;
        return;
      }
      tsApi().forEachChild(n, visit);
    };
    visit(parsed.sourceFile);
    if (found) return { parsed, node: found, prefix: open.length, source };
  }
  return undefined;
}

/** The shape of a live function, from its `toString()`. */
export function runtimeShape(fn: Function): Shape | undefined {
  const snippet = parseFunctionText(fn);
  return snippet ? shapeOf(snippet.node) : undefined;
}

/** Where V8 places a function: at its name when it has one, else at its first token. */
function anchor(node: ts.Node, sf: ts.SourceFile): number {
  const name = (node as { name?: ts.Node }).name;
  return name ? name.getStart(sf) : node.getStart(sf);
}

/**
 * The node in `parsed` that the live function `fn` was made from: the function-like node
 * nearest the reported position whose shape matches `fn.toString()`, else the best match in the
 * whole file. Undefined when nothing in the file looks like `fn` (the file changed on disk, or
 * the position belongs to something else).
 */
export function findFunctionNode(
  parsed: ParsedFile,
  line: number,
  column: number,
  shape: Shape | undefined,
): ts.Node | undefined {
  const t = tsApi();
  const sf = parsed.sourceFile;
  const lineCount = sf.getLineStarts().length;
  const l = Math.min(Math.max(line - 1, 0), lineCount - 1);
  const lineStart = sf.getLineStarts()[l]!;
  const lineEnd = l + 1 < lineCount ? sf.getLineStarts()[l + 1]! : sf.text.length;
  const pos = Math.min(lineStart + Math.max(column - 1, 0), lineEnd);
  const candidates: ts.Node[] = [];
  const visit = (n: ts.Node): void => {
    if (isFunctionLike(n)) candidates.push(n);
    t.forEachChild(n, visit);
  };
  visit(sf);
  const distance = (n: ts.Node): number => Math.abs(anchor(n, sf) - pos);
  if (!shape) {
    // No text to compare with: the nearest node starting on the reported line.
    const onLine = candidates.filter((n) => {
      const a = anchor(n, sf);
      return a >= lineStart && a <= lineEnd;
    });
    onLine.sort((a, b) => distance(a) - distance(b));
    return onLine[0];
  }
  let best: ts.Node | undefined;
  let bestSim = 0;
  let bestDistance = Infinity;
  for (const n of candidates) {
    const sim = similarity(shape, shapeOf(n));
    if (sim < 0.6) continue;
    // Similarity decides; among equals, the nearest to where V8 says the function is.
    const d = distance(n);
    if (sim > bestSim || (sim === bestSim && d < bestDistance)) {
      best = n;
      bestSim = sim;
      bestDistance = d;
    }
  }
  return best;
}
