// "Did you mean" for names a user typed: an options key, an argument name, a zoo model. One
// edit distance (Levenshtein, case-insensitive) and one sentence shape, so every unknown name
// in Kiln is reported the same way: `no option 'recompileLimt'; did you mean 'recompileLimit'?
// (options: backend, ...)`.

/** Edit distance between `a` and `b` (insertions, deletions, substitutions), ignoring case. */
export function editDistance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      const sub = prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1);
      row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, sub));
    }
    prev = row;
  }
  return prev[y.length]!;
}

/** The closest of `known` to `name`, when it is close enough to be a typo. */
export function closest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  // A third of the longer name's letters may differ (at least one), or it is not a typo.
  const limit = Math.max(1, Math.floor(Math.max(name.length, best?.length ?? 0) / 3));
  return best !== undefined && bestD <= limit ? best : undefined;
}

/** `; did you mean 'x'? (<what>: a, b, c)`, or just the list when nothing is close. */
export function suggestion(name: string, known: readonly string[], what: string): string {
  // One candidate is the one meant, however far the typo.
  const near = known.length === 1 ? known[0] : closest(name, known);
  const list = known.length > 0 ? ` (${what}: ${known.join(", ")})` : "";
  return `${near !== undefined ? `; did you mean '${near}'?` : ""}${list}`;
}

/**
 * Throws `error(message)` for the first own key of `obj` not in `known`: `<where>: no <noun>
 * '<key>'; did you mean ...`.
 */
export function checkKnownKeys(
  obj: object,
  known: readonly string[],
  where: string,
  error: (message: string) => Error,
  noun = "option",
): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) {
      throw error(`${where}: no ${noun} '${key}'${suggestion(key, known, `${noun}s`)}`);
    }
  }
}
