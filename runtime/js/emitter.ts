// What the `js` backend's generated source shares: the module-level table of values the source
// refers to by name (literal data, library kernels, the evaluator's scalar kernels, plans), and
// the spelling of numbers and comments in generated code.

/** Text safe inside a `//` comment of generated code (names may hold any character). */
export function commentText(s: string): string {
  return s.replace(/[\n\r\u2028\u2029]/g, " ");
}

/** Formats a number as a JavaScript literal that evaluates to exactly that double. */
export function numLit(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return "-0";
  return String(v);
}

/**
 * The module-level table of values the generated source refers to by name (`e3`): literal data,
 * library kernels, scalar helpers. The same object (or key) is listed once.
 */
export class ExtTable {
  readonly values: unknown[] = [];
  /** The key each entry was listed under (the value itself unless `ref` was given a key). */
  readonly keys: unknown[] = [];
  private readonly comments: string[] = [];
  private readonly byKey = new Map<unknown, string>();

  /** The name under which `value` is visible to the generated code. */
  ref(value: unknown, comment: string, key: unknown = value): string {
    const known = this.byKey.get(key);
    if (known !== undefined) return known;
    const name = `e${this.values.length}`;
    this.values.push(value);
    this.keys.push(key);
    this.comments.push(comment);
    this.byKey.set(key, name);
    return name;
  }

  /** `const e0 = ext[0]; // comment` lines, one per entry. */
  declarations(): string[] {
    return this.values.map(
      (_, i) => `const e${i} = ext[${i}]; // ${commentText(this.comments[i]!)}`,
    );
  }
}
