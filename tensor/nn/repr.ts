// Python's spelling of the values that appear in PyTorch's module reprs (`Linear(in_features=4,
// out_features=8, bias=True)`, `LayerNorm((4,), eps=1e-05, ...)`), so a Kiln module prints the
// way a PyTorch user expects to read it: True/False/None, tuples with the one-element trailing
// comma, quoted strings, and floats in Python's shortest round-trip form (`1e-05`, `0.1`, `1.0`).

/** `True` / `False`. */
export function pyBool(b: boolean): string {
  return b ? "True" : "False";
}

/** Python's repr of a float: shortest round-trip digits, exponent form below 1e-4 or >= 1e16. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, expPart] = x.toExponential().split("e") as [string, string];
  const exp = Number(expPart);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp) < 10 ? `0${Math.abs(exp)}` : String(Math.abs(exp));
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${e}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  const intDigits = exp + 1;
  if (digits.length <= intDigits) return `${sign}${digits.padEnd(intDigits, "0")}.0`;
  return `${sign}${digits.slice(0, intDigits)}.${digits.slice(intDigits)}`;
}

/** A Python value: numbers as ints when integral (unless `float`), lists as tuples. */
export type PyValue = number | boolean | string | null | undefined | readonly PyValue[];

/** Python's repr of a value: `(2, 3)`, `(4,)`, `None`, `'tanh'`, `True`, `3`. */
export function pyRepr(v: PyValue): string {
  if (v === null || v === undefined) return "None";
  if (typeof v === "boolean") return pyBool(v);
  if (typeof v === "string") return `'${v}'`;
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : pyFloat(v);
  const items = v.map(pyRepr);
  return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
}

/** PyTorch's `_addindent`: every line but the first indented by `spaces`. */
export function addIndent(s: string, spaces: number): string {
  const lines = s.split("\n");
  if (lines.length === 1) return s;
  const pad = " ".repeat(spaces);
  return [lines[0], ...lines.slice(1).map((l) => pad + l)].join("\n");
}
