// How much of XLA's HLO dialect Kiln reads: over a corpus of HLO modules extracted from XLA's own
// sources (scripts/xla/extract_corpus.py), counts how many modules Kiln parses, verifies and round
// trips (print -> parse and proto -> read, fingerprints equal), and for those it does not, the
// first cause per module (an element type, an opcode, an attribute, a syntax form, a verifier
// rule), most modules first. With --xla (jaxlib installed) it also asks XLA which modules it
// accepts (scripts/xla/xla_accepts.py) and reports Kiln's figures over those.
//
//   python3 scripts/xla/extract_corpus.py <xla checkout> corpus.jsonl
//   npx tsx scripts/xla/measure_dialect.ts corpus.jsonl [--xla | --verdicts v.jsonl] [--list]
//       [--json out.json]
//
// --verdicts reads XLA's verdicts saved from an earlier `xla_accepts.py corpus.jsonl > v.jsonl`
// instead of running jaxlib again. --list prints every failing module with its cause and Kiln's
// message.

import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fingerprint } from "../../ir/fingerprint.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";

interface CorpusModule {
  id: string;
  source: string;
  text: string;
}

type Stage = "parse" | "verify" | "text round trip" | "proto round trip";

interface Outcome {
  id: string;
  source: string;
  /** The first stage that failed, or null when all passed. */
  failed: Stage | null;
  cause?: string;
  message?: string;
  xla?: XlaVerdict;
}

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split("\n")[0]!;
}

/** A short cause for a Kiln error message: what XLA has that Kiln does not read. */
export function causeOf(stage: Stage, message: string): string {
  let m: RegExpExecArray | null;
  if ((m = /expected an element type \([^)]*\), got '([^']+)'/.exec(message))) {
    return `element type ${m[1]}`;
  }
  if ((m = /unknown opcode '([^']+)'/.exec(message))) return `opcode ${m[1]}`;
  if ((m = /expected an attribute of ([\w-]+) \([^)]*\), got unknown attribute '([^']+)'/.exec(
    message,
  ))) {
    return `attribute ${m[2]} (on ${m[1]})`;
  }
  if (/tiled or memory-space layouts/.test(message)) return "tiled/memory-space layout";
  if (/tuple constants are not supported/.test(message)) return "tuple constant";
  if ((m = /expected attribute '([^']+)=' \(required by ([\w-]+)\)/.exec(message))) {
    return `attribute ${m[1]} omitted (on ${m[2]})`;
  }
  // Anything else: the message without positions, names, shapes and numbers, so that one rule
  // failing in many modules counts as one cause.
  const detail = message
    .replace(/^HLO parse error at line \d+, column \d+: /, "")
    .replace(/^verifier: %?[\w.-]+( in [\w.-]+)?: /, "")
    .replace(/%[\w.-]+/g, "%x")
    .replace(/'[^']*'/g, "'…'")
    .replace(/\b(pred|[suf]\d+|bf16|c64|c128|token)\[[^\]]*\](\{[^}]*\})?/g, "T[…]")
    .replace(/\d+/g, "N");
  return `${stage}: ${detail.slice(0, 140)}`;
}

function measureOne(m: CorpusModule): Outcome {
  const out: Outcome = { id: m.id, source: m.source, failed: null };
  const fail = (stage: Stage, e: unknown): Outcome => {
    out.failed = stage;
    out.message = firstLine(e);
    out.cause = causeOf(stage, out.message);
    return out;
  };
  let module;
  try {
    module = parseHlo(m.text);
  } catch (e) {
    return fail("parse", e);
  }
  try {
    verifyModule(module);
  } catch (e) {
    return fail("verify", e);
  }
  let want: string;
  try {
    want = fingerprint(module);
    const back = parseHlo(printHlo(module));
    if (fingerprint(back) !== want) {
      throw new Error("printed text reads back as a different module");
    }
  } catch (e) {
    return fail("text round trip", e);
  }
  try {
    const back = moduleFromProto(moduleToProto(module));
    if (fingerprint(back) !== want) throw new Error("proto reads back as a different module");
  } catch (e) {
    return fail("proto round trip", e);
  }
  return out;
}

interface XlaVerdict {
  parsed: boolean;
  verified: boolean;
  error?: string;
}

function xlaVerdicts(corpusPath: string, saved: string | undefined): Map<string, XlaVerdict> {
  let text: string;
  if (saved !== undefined) {
    text = readFileSync(saved, "utf8");
  } else {
    const script = join(import.meta.dirname, "xla_accepts.py");
    const r = spawnSync("python3", [script, corpusPath], {
      encoding: "utf8",
      maxBuffer: 1 << 28,
    });
    if (r.status !== 0) {
      throw new Error(`xla_accepts.py failed (is jaxlib installed?): ${r.stderr.slice(0, 2000)}`);
    }
    text = r.stdout;
  }
  const out = new Map<string, XlaVerdict>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const v = JSON.parse(line) as XlaVerdict & { id: string };
    out.set(v.id, v);
  }
  return out;
}

function pct(n: number, d: number): string {
  return d === 0 ? "-" : `${((100 * n) / d).toFixed(1)}%`;
}

function report(title: string, outcomes: readonly Outcome[]): void {
  const n = outcomes.length;
  const parsed = outcomes.filter((o) => o.failed !== "parse").length;
  const verified = outcomes.filter(
    (o) => o.failed === null || o.failed.endsWith("round trip"),
  ).length;
  const tripped = outcomes.filter((o) => o.failed === null).length;
  console.log(`\n${title}: ${n} modules`);
  console.log(`  parse:                      ${parsed} (${pct(parsed, n)})`);
  console.log(`  parse + verify:             ${verified} (${pct(verified, n)})`);
  console.log(`  + text and proto round trip: ${tripped} (${pct(tripped, n)})`);
  const byCause = new Map<string, number>();
  for (const o of outcomes) if (o.cause) byCause.set(o.cause, (byCause.get(o.cause) ?? 0) + 1);
  const causes = [...byCause].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (causes.length > 0) console.log("  first cause per failing module:");
  for (const [cause, count] of causes) console.log(`    ${String(count).padStart(5)}  ${cause}`);
}

function main(): void {
  const args = process.argv.slice(2);
  const valued = new Set(["--json", "--verdicts"]);
  const corpusPath = args.find((a, i) => !a.startsWith("--") && !valued.has(args[i - 1] ?? ""));
  if (!corpusPath) {
    console.error(
      "usage: measure_dialect.ts <corpus.jsonl> [--xla | --verdicts v.jsonl] [--list] " +
        "[--json out.json]",
    );
    process.exit(2);
  }
  const jsonAt = args.indexOf("--json");
  const modules = readFileSync(corpusPath, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as CorpusModule);
  const outcomes = modules.map(measureOne);
  const sources = new Set(modules.map((m) => m.source));
  report(`Kiln over the corpus (${sources.size} source files)`, outcomes);
  const verdictsAt = args.indexOf("--verdicts");
  const savedVerdicts = verdictsAt >= 0 ? args[verdictsAt + 1] : undefined;
  if (args.includes("--xla") || savedVerdicts !== undefined) {
    const verdicts = xlaVerdicts(corpusPath, savedVerdicts);
    for (const o of outcomes) o.xla = verdicts.get(o.id);
    const xlaParsed = outcomes.filter((o) => o.xla?.parsed);
    const xlaVerified = outcomes.filter((o) => o.xla?.verified);
    console.log(
      `\nXLA (jaxlib): parses ${xlaParsed.length} of ${outcomes.length}; ` +
        `imports and verifies ${xlaVerified.length}`,
    );
    report("Kiln over the modules XLA parses", xlaParsed);
    const rejected = outcomes.filter(
      (o) => o.xla !== undefined && !o.xla.parsed && o.failed === null,
    );
    if (rejected.length > 0) {
      console.log(`\nKiln reads ${rejected.length} modules XLA's parser rejects:`);
      for (const o of rejected) console.log(`  ${o.id}: ${o.xla?.error ?? ""}`);
    }
  }
  if (args.includes("--list")) {
    console.log("\nfailing modules:");
    for (const o of outcomes) {
      if (o.failed) console.log(`  ${o.id}  [${o.cause}]  ${o.message}`);
    }
  }
  if (jsonAt >= 0 && args[jsonAt + 1]) {
    writeFileSync(args[jsonAt + 1]!, JSON.stringify(outcomes, null, 1));
  }
}

main();
