// Size specs on the command line: `batch=2,seq=128` (one spec, for --shape), ranges `seq=1..512`
// (every size from 1 to 512 in order, for --shapes; several ranges give every combination, the
// first key slowest), and a file with one spec per line (blank lines and `#` comments
// skipped). Errors are one line naming the offending text, so `kiln` can print them as they are.

import { existsSync, readFileSync, statSync } from "node:fs";
import { CliError, EXIT } from "./errors.ts";

/** One size spec: `{ batch: 2, seq: 128 }`, keys in the order written. */
export type SizeSpec = Readonly<Record<string, number>>;

/** The most specs one --shapes may expand to (a typo like 1..5000000 is an error, not a hang). */
export const MAX_SPECS = 100_000;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INT = /^[0-9]+$/;

function bad(text: string, why: string): CliError {
  return new CliError(EXIT.usage, `bad size spec '${text}': ${why}`);
}

function positive(text: string, value: string): number {
  if (!INT.test(value)) throw bad(text, `'${value}' is not a positive integer`);
  const n = Number(value);
  if (n < 1 || !Number.isSafeInteger(n)) throw bad(text, `'${value}' is not a positive integer`);
  return n;
}

interface Term {
  readonly name: string;
  readonly lo: number;
  readonly hi: number;
}

function parseTerms(text: string): Term[] {
  const src = text.trim();
  if (src === "") throw bad(text, "it is empty (expected name=value pairs like batch=2,seq=128)");
  const terms: Term[] = [];
  for (const part of src.split(",")) {
    const item = part.trim();
    const eq = item.indexOf("=");
    if (eq < 0) throw bad(text, `'${item}' is not name=value`);
    const name = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (!NAME.test(name)) throw bad(text, `'${name}' is not a size name`);
    if (terms.some((t) => t.name === name)) throw bad(text, `'${name}' is given twice`);
    const dots = value.indexOf("..");
    if (dots < 0) {
      const n = positive(text, value);
      terms.push({ name, lo: n, hi: n });
      continue;
    }
    const lo = positive(text, value.slice(0, dots).trim());
    const hi = positive(text, value.slice(dots + 2).trim());
    if (hi < lo) throw bad(text, `the range ${lo}..${hi} is empty`);
    terms.push({ name, lo, hi });
  }
  return terms;
}

/** One spec, no ranges (`--shape batch=2,seq=128`). */
export function parseSpec(text: string): SizeSpec {
  const out: Record<string, number> = {};
  for (const t of parseTerms(text)) {
    if (t.lo !== t.hi) {
      throw bad(text, `'${t.name}' is a range; --shape takes one size (use --shapes for ranges)`);
    }
    out[t.name] = t.lo;
  }
  return out;
}

/** Every spec a line with ranges stands for, in order (first key slowest). */
export function expandSpec(text: string): SizeSpec[] {
  const terms = parseTerms(text);
  let count = 1;
  for (const t of terms) count *= t.hi - t.lo + 1;
  if (count > MAX_SPECS) {
    throw bad(text, `it expands to ${count} specs (at most ${MAX_SPECS})`);
  }
  let specs: Record<string, number>[] = [{}];
  for (const t of terms) {
    const next: Record<string, number>[] = [];
    for (const s of specs) for (let v = t.lo; v <= t.hi; v++) next.push({ ...s, [t.name]: v });
    specs = next;
  }
  return specs;
}

/** Specs from lines of text (a --shapes file): one spec per line, ranges allowed. */
export function parseSpecLines(text: string, source: string): SizeSpec[] {
  const out: SizeSpec[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.replace(/#.*$/, "").trim();
    if (line === "") continue;
    try {
      out.push(...expandSpec(line));
    } catch (e) {
      if (e instanceof CliError) throw new CliError(e.code, `${source}:${i + 1}: ${e.message}`);
      throw e;
    }
    if (out.length > MAX_SPECS) {
      throw new CliError(EXIT.usage, `${source}: more than ${MAX_SPECS} specs`);
    }
  }
  if (out.length === 0) throw new CliError(EXIT.usage, `${source}: no size specs in the file`);
  return out;
}

/**
 * `--shapes`: a file (when an existing file has that name) with one spec per line, or specs
 * written inline, several separated by `;` (`batch=1,seq=1..8;batch=2,seq=4`).
 */
export function parseShapes(arg: string): SizeSpec[] {
  if (existsSync(arg)) {
    if (!statSync(arg).isFile()) throw new CliError(EXIT.usage, `--shapes '${arg}' is not a file`);
    return parseSpecLines(readFileSync(arg, "utf8"), arg);
  }
  // Specs always have a name=value pair; text without one was meant as a file's name.
  if (!arg.includes("=")) {
    throw new CliError(
      EXIT.usage,
      `--shapes '${arg}': no such file (specs are written name=value, e.g. seq=1..8)`,
    );
  }
  const out: SizeSpec[] = [];
  for (const part of arg.split(";")) {
    if (part.trim() === "" && arg.includes(";")) continue;
    out.push(...expandSpec(part));
    if (out.length > MAX_SPECS) throw bad(arg, `it expands to more than ${MAX_SPECS} specs`);
  }
  return out;
}

/**
 * `batch=2,seq=128`: how a spec prints in tables and messages; `defaults` for the empty spec
 * (the model's default sizes), a word and not `(defaults)`, since callers put specs in
 * parentheses themselves.
 */
export function formatSpec(spec: SizeSpec): string {
  const parts = Object.entries(spec).map(([k, v]) => `${k}=${v}`);
  return parts.length === 0 ? "defaults" : parts.join(",");
}
