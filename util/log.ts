// KILN_LOGS: topic-based logging to stderr. `KILN_LOGS=fusion,passes` turns on those topics,
// `KILN_LOGS=all` every topic. Topics in use: recompiles, graph_breaks, guards, ir, passes, lazy,
// fusion, perf, cache, backend, analysis. The setting is read once per process unless `setLogTopics`
// overrides it (tests and the CLI use that).

let topics: Set<string> | undefined;

function current(): Set<string> {
  if (!topics) {
    const raw = process.env["KILN_LOGS"] ?? "";
    topics = new Set(
      raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== ""),
    );
  }
  return topics;
}

/** True when `topic` is on (or `all` is). */
export function logEnabled(topic: string): boolean {
  const t = current();
  return t.has(topic) || t.has("all");
}

/** Writes `[kiln:topic] message` to stderr when the topic is on. */
export function log(topic: string, message: string | (() => string)): void {
  if (!logEnabled(topic)) return;
  const text = typeof message === "function" ? message() : message;
  for (const line of text.split("\n")) process.stderr.write(`[kiln:${topic}] ${line}\n`);
}

/** Overrides KILN_LOGS (a list of topics), or restores it from the environment with undefined. */
export function setLogTopics(list: readonly string[] | undefined): void {
  topics = list ? new Set(list) : undefined;
}
