// The fault-injection battery (`npm run fuzz`): reruns each category of malformed or random
// input with a seed and a budget and prints, per category, how many cases were tried, rejected
// cleanly, accepted, crashed (an error that is not one of Kiln's own types — a TypeError,
// RangeError, plain Error — or a dead process), hung (past the per-case timeout), accepted-wrong
// (bad input taken as good) and wrong (a result or an error message that is not what it must
// be). Every case runs in a child process (one per category, restarted after a hang or a crash),
// so a case that loops forever or aborts Node is counted, not fatal. A case is a pure function
// of (category, seed, index): a failure reproduces with `--seed S --category C --only INDEX`.
//
//   npm run fuzz -- [--seed N] [--budget COUNT | --budget SECONDSs] [--category NAME,...]
//                   [--backends NAME,...] [--timeout MS] [--only INDEX] [--verbose]
//
// test/fuzz.test.ts runs a small fixed-seed slice of this in `npm test`.

import { fork, type ChildProcess } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { rng } from "../test/passes/support.ts";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const CATEGORIES = [
  "hlo-text",
  "hlo-proto",
  "safetensors",
  "eager-misuse",
  "cache-tamper",
  "programs",
] as const;
export type Category = (typeof CATEGORIES)[number];

/** What one case came to. `hung` and process deaths are decided by the parent. */
export type Outcome = "rejected" | "accepted" | "crashed" | "hung" | "accepted-wrong" | "wrong";
const OUTCOMES: readonly Outcome[] = [
  "rejected",
  "accepted",
  "crashed",
  "hung",
  "accepted-wrong",
  "wrong",
];

export interface CaseResult {
  readonly index: number;
  readonly outcome: Outcome;
  readonly detail: string;
}

export interface CategoryReport {
  readonly category: Category;
  readonly tried: number;
  readonly counts: Readonly<Record<Outcome, number>>;
  /** The cases that were not rejected or accepted cleanly, with what went wrong. */
  readonly failures: readonly CaseResult[];
}

export interface FuzzOptions {
  seed?: number;
  /** Cases per category (a number), or seconds for the whole run (`"60s"`). */
  budget?: number | string;
  categories?: readonly Category[];
  /** Backends for `programs` (default: every registered backend). */
  backends?: readonly string[];
  /** Per-case timeout in ms (default 20 s; native compiles take seconds). */
  timeoutMs?: number;
  /** Run only this case index of each category. */
  only?: number;
  /** For the harness's own test: every case hangs, or aborts the process, instead of running. */
  selfTest?: "hang" | "abort";
}

const SCRIPT = fileURLToPath(import.meta.url);
/** How long a child may take to start and load a category's modules (a loaded machine is slow). */
const STARTUP_MS = 180_000;
const ROOT = join(SCRIPT, "..", "..");

// ---- the parent: scheduling, timeouts, the table ---------------------------------------------

export interface WorkerJob {
  category: Category;
  seed: number;
  index: number;
  backends: readonly string[] | undefined;
  selfTest?: "hang" | "abort" | undefined;
}

class Worker {
  private child: ChildProcess | undefined;
  private pending:
    | {
        resolve: (r: { outcome: Outcome; detail: string }) => void;
        timer: NodeJS.Timeout;
        child: ChildProcess;
      }
    | undefined;
  private stderr = "";

  private start(): ChildProcess {
    const child = fork(SCRIPT, ["--worker"], {
      cwd: ROOT,
      execArgv: ["--import", "tsx", "--stack-size=4000"],
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      env: { ...process.env, NODE_NO_WARNINGS: "1" },
    });
    child.stderr?.on("data", (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-2000);
    });
    child.on("message", (m: { outcome: Outcome; detail: string }) => this.settle(child, m));
    child.on("exit", (code, signal) => {
      if (this.child === child) this.child = undefined;
      const tail = this.stderr.trim().split("\n").slice(-3).join(" | ");
      this.settle(child, {
        outcome: "crashed",
        detail: `the process died (${signal ?? `exit ${code}`}): ${tail}`,
      });
    });
    this.child = child;
    return child;
  }

  /** Ends the pending case, if `child` is the process running it (a killed one may exit late). */
  private settle(child: ChildProcess, r: { outcome: Outcome; detail: string }): void {
    const p = this.pending;
    if (!p || p.child !== child) return;
    clearTimeout(p.timer);
    this.pending = undefined;
    p.resolve(r);
  }

  /** A started child that has loaded the category's modules: start-up is not the case's time. */
  private async ready(category: Category): Promise<ChildProcess | undefined> {
    if (this.child) return this.child;
    const child = this.start();
    const answer = await new Promise<{ outcome: Outcome; detail: string }>((resolve) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        resolve({ outcome: "hung", detail: "start-up" });
      }, STARTUP_MS);
      this.pending = { resolve, timer, child };
      child.send({ warm: category });
    });
    if (answer.outcome === "accepted") return child;
    child.kill("SIGKILL");
    this.child = undefined;
    return undefined;
  }

  async run(job: WorkerJob, timeoutMs: number): Promise<{ outcome: Outcome; detail: string }> {
    const child = await this.ready(job.category);
    if (!child) {
      return { outcome: "crashed", detail: `the worker did not start: ${this.stderr.trim()}` };
    }
    this.stderr = "";
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        this.child = undefined;
        child.kill("SIGKILL");
        const tail = this.stderr.trim().split("\n").slice(-2).join(" | ");
        resolve({ outcome: "hung", detail: `no answer within ${timeoutMs} ms ${tail}`.trim() });
      }, timeoutMs);
      this.pending = { resolve, timer, child };
      child.send(job);
    });
  }

  close(): void {
    this.child?.kill("SIGKILL");
    this.child = undefined;
  }
}

/** Runs the battery; resolves to one report per category. */
export async function runFuzz(opts: FuzzOptions = {}): Promise<CategoryReport[]> {
  const seed = opts.seed ?? 1;
  const categories = opts.categories ?? CATEGORIES;
  const budget = opts.budget ?? 50;
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const seconds =
    typeof budget === "string" && /^\d+(\.\d+)?s$/.test(budget) ? parseFloat(budget) : undefined;
  const count = seconds === undefined ? Number(budget) : Infinity;
  if (seconds === undefined && !(Number.isInteger(count) && count >= 0)) {
    throw new Error(`fuzz: --budget must be a case count or seconds like 60s, got '${budget}'`);
  }
  const reports: CategoryReport[] = [];
  for (const category of categories) {
    const deadline =
      seconds === undefined ? Infinity : performance.now() + (seconds * 1000) / categories.length;
    const worker = new Worker();
    const counts = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
    const failures: CaseResult[] = [];
    let tried = 0;
    try {
      const indices = opts.only !== undefined ? [opts.only] : undefined;
      for (let k = 0; indices ? k < indices.length : k < count; k++) {
        if (performance.now() > deadline) break;
        const index = indices ? indices[k]! : k;
        const job = { category, seed, index, backends: opts.backends, selfTest: opts.selfTest };
        const r = await worker.run(job, timeoutMs);
        tried++;
        counts[r.outcome]++;
        if (r.outcome !== "rejected" && r.outcome !== "accepted") {
          failures.push({ index, ...r });
        }
      }
    } finally {
      worker.close();
    }
    reports.push({ category, tried, counts, failures });
  }
  return reports;
}

export function formatReports(reports: readonly CategoryReport[], verbose = false): string {
  const cols = ["tried", "rejected", "accepted", "crashed", "hung", "accepted-wrong", "wrong"];
  const rows = reports.map((r) => [
    r.category,
    String(r.tried),
    ...cols.slice(1).map((c) => String(r.counts[c as Outcome])),
  ]);
  const head = ["category", ...cols];
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(width[i]!) : c.padStart(width[i]!))).join("  ");
  const out = [line(head), ...rows.map(line)];
  for (const r of reports) {
    const shown = verbose ? r.failures : r.failures.slice(0, 3);
    for (const f of shown) {
      const first = f.detail.split("\n")[0]!.slice(0, 300);
      out.push(`  ${r.category} #${f.index} ${f.outcome}: ${first}`);
    }
    if (shown.length < r.failures.length) {
      out.push(`  ${r.category}: ${r.failures.length - shown.length} more (--verbose)`);
    }
  }
  return out.join("\n");
}

// ---- the child: one case at a time ---------------------------------------------------------

/** The tests' deterministic PRNG (mulberry32), seeded per (category, seed, index). */
function rngFor(category: string, seed: number, index: number): () => number {
  const h = createHash("sha256").update(`${category}:${seed}:${index}`).digest();
  return rng(h.readUInt32LE(0));
}

const BUILTIN_ERRORS = [TypeError, RangeError, ReferenceError, SyntaxError, URIError, EvalError];

/** One of Kiln's own error types: an Error subclass that is not a JavaScript builtin. */
export function isKilnError(e: unknown): e is Error {
  return (
    e instanceof Error &&
    e.constructor !== Error &&
    !BUILTIN_ERRORS.some((B) => e.constructor === B) &&
    !(e instanceof AggregateError)
  );
}

function describeError(e: unknown): string {
  return e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e);
}

type Result = { outcome: Outcome; detail: string };
const ok = (detail = ""): Result => ({ outcome: "accepted", detail });
const rejected = (e: unknown): Result =>
  isKilnError(e)
    ? { outcome: "rejected", detail: describeError(e) }
    : { outcome: "crashed", detail: describeError(e) };

/** Random edits: delete, insert or replace a character (or byte). */
function mutateText(text: string, r: () => number): string {
  const chars = "{}()[],=%:<>-_.x\"\\/* \n0123456789abcfsu";
  let t = text;
  const n = 1 + Math.floor(r() * 4);
  for (let k = 0; k < n; k++) {
    const i = Math.floor(r() * (t.length + 1));
    const ch = chars[Math.floor(r() * chars.length)]!;
    const kind = r();
    if (kind < 0.33) t = t.slice(0, i) + t.slice(i + 1);
    else if (kind < 0.66) t = t.slice(0, i) + ch + t.slice(i);
    else t = t.slice(0, i) + ch + t.slice(i + 1);
  }
  return t;
}

function mutateBytes(bytes: Uint8Array, r: () => number, from = 0, to = bytes.length): Uint8Array {
  const out = bytes.slice();
  const n = 1 + Math.floor(r() * 4);
  for (let k = 0; k < n; k++) {
    const i = from + Math.floor(r() * Math.max(1, to - from));
    if (i < out.length) out[i] = Math.floor(r() * 256);
  }
  return r() < 0.2 ? out.subarray(0, Math.floor(r() * out.length)) : out;
}

async function corpusTexts(): Promise<string[]> {
  const dir = join(ROOT, "test", "ir", "corpus");
  return readdirSync(dir)
    .filter((f) => f.endsWith(".hlo"))
    .sort()
    .map((f) => readFileSync(join(dir, f), "utf8"));
}

async function caseHloText(r: () => number): Promise<Result> {
  const { parseHlo } = await import("../ir/parse.ts");
  const { printHlo } = await import("../ir/print.ts");
  const { verifyModule } = await import("../ir/verify.ts");
  const texts = await corpusTexts();
  const text = mutateText(texts[Math.floor(r() * texts.length)]!, r);
  let m;
  try {
    m = parseHlo(text);
  } catch (e) {
    return rejected(e);
  }
  // Accepted text must be a valid module that prints and reads back to the same module.
  try {
    verifyModule(m);
    const printed = printHlo(m);
    if (printHlo(parseHlo(printed)) !== printed) {
      return { outcome: "accepted-wrong", detail: "accepted, but print → parse changed it" };
    }
  } catch (e) {
    return { outcome: isKilnError(e) ? "accepted-wrong" : "crashed", detail: describeError(e) };
  }
  return ok();
}

async function caseHloProto(r: () => number): Promise<Result> {
  const { parseHlo } = await import("../ir/parse.ts");
  const { printHlo } = await import("../ir/print.ts");
  const { verifyModule } = await import("../ir/verify.ts");
  const { moduleFromProto, moduleToProto } = await import("../ir/proto.ts");
  const texts = await corpusTexts();
  const bytes = mutateBytes(moduleToProto(parseHlo(texts[Math.floor(r() * texts.length)]!)), r);
  let m;
  try {
    m = moduleFromProto(bytes);
    verifyModule(m);
  } catch (e) {
    return rejected(e);
  }
  try {
    const printed = printHlo(m);
    if (printHlo(parseHlo(printed)) !== printed) {
      return { outcome: "accepted-wrong", detail: "read, but its text does not read back" };
    }
  } catch (e) {
    return { outcome: isKilnError(e) ? "accepted-wrong" : "crashed", detail: describeError(e) };
  }
  return ok();
}

/**
 * The safetensors format's own rules (its reference parser): an 8-byte LE header length, a UTF-8
 * JSON object header (no BOM) with dtype, shape and data_offsets per tensor, each tensor's
 * offsets covering exactly its bytes, in bounds. A reason when the file breaks one.
 */
function safetensorsProblem(bytes: Uint8Array): string | undefined {
  if (bytes.length < 8) return "shorter than its 8-byte header length";
  const n = Number(Buffer.from(bytes).readBigUInt64LE(0));
  if (n + 8 > bytes.length) return "header length past the end";
  const head = bytes.subarray(8, 8 + n);
  if (head[0] !== 0x7b) return "header does not start with '{'";
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(head));
  } catch {
    return "header is not UTF-8 JSON";
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return "not an object";
  const size: Record<string, number> = {
    F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1,
  };
  const data = bytes.length - 8 - n;
  for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const t = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof t.dtype !== "string" || size[t.dtype] === undefined) return `${name}: dtype`;
    if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      return `${name}: shape`;
    }
    const o = t.data_offsets;
    if (!Array.isArray(o) || o.length !== 2 || !o.every((x) => Number.isSafeInteger(x))) {
      return `${name}: data_offsets`;
    }
    const numel = (t.shape as number[]).reduce((a, b) => a * b, 1);
    if (o[1] < o[0] || o[1] > data || o[1] - o[0] !== numel * size[t.dtype]!) {
      return `${name}: data_offsets [${o.join(", ")}] do not cover its ${numel} elements`;
    }
  }
  return undefined;
}

async function caseSafetensors(r: () => number, index: number): Promise<Result> {
  const { readSafetensors, saveSafetensors } = await import("../tensor/safetensors.ts");
  const { tensor } = await import("../tensor/index.ts");
  const dir = mkdtempSync(join(tmpdir(), "kiln-fuzz-st-"));
  try {
    let path: string;
    if (index === 0) {
      path = "/dev/zero"; // not a regular file: must be refused, never read forever
    } else {
      const good = saveSafetensors(
        {
          w: tensor([[1, 2, 3], [4, 5, 6]]),
          b: tensor([0.5, -0], { dtype: "float16" }),
          i: tensor([1, 2, 3, 4], { dtype: "int64" }),
        },
        { metadata: { format: "pt" } },
      );
      const n = Number(Buffer.from(good).readBigUInt64LE(0));
      let bytes: Uint8Array;
      if (index === 1) {
        // A UTF-8 BOM before the header's '{' (the reference parser rejects it).
        const head = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), good.subarray(8, 8 + n)]);
        const len = Buffer.alloc(8);
        len.writeBigUInt64LE(BigInt(head.length));
        bytes = Buffer.concat([len, head, good.subarray(8 + n)]);
      } else if (r() < 0.3) {
        bytes = mutateBytes(good, r, 0, 8); // the header length
      } else if (r() < 0.6) {
        // Edit the header's text: digits, brackets, quotes.
        const text = mutateText(Buffer.from(good.subarray(8, 8 + n)).toString("latin1"), r);
        const head = Buffer.from(text, "latin1");
        const len = Buffer.alloc(8);
        len.writeBigUInt64LE(BigInt(r() < 0.8 ? head.length : n));
        bytes = Buffer.concat([len, head, good.subarray(8 + n)]);
      } else {
        bytes = mutateBytes(good, r, 8, 8 + n);
      }
      path = join(dir, "m.safetensors");
      writeFileSync(path, bytes);
    }
    try {
      readSafetensors(path);
    } catch (e) {
      return rejected(e);
    }
    const bytes = path === "/dev/zero" ? new Uint8Array(0) : readFileSync(path);
    const why = path === "/dev/zero" ? "read /dev/zero as a file" : safetensorsProblem(bytes);
    return why === undefined ? ok() : { outcome: "accepted-wrong", detail: `accepted: ${why}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Misuse of the eager API (test/fixtures/fuzz_misuse.ts): each error must name its line. */
async function caseEagerMisuse(r: () => number, index: number): Promise<Result> {
  const { MISUSES: cases } = await import("../test/fixtures/fuzz_misuse.ts");
  void r;
  const k = index % cases.length;
  try {
    cases[k]!();
  } catch (e) {
    if (!isKilnError(e)) return { outcome: "crashed", detail: describeError(e) };
    const msg = e.message;
    // The user's frame is the fixture: the message must end with `at <file>:<line>:<col>`.
    if (!/fuzz_misuse\.ts:\d+:\d+\)?\s*$/.test(msg)) {
      return { outcome: "wrong", detail: `misuse ${k}: no user file:line:col in '${msg}'` };
    }
    return { outcome: "rejected", detail: msg };
  }
  return { outcome: "accepted-wrong", detail: `misuse ${k} was accepted` };
}

/**
 * Layout 2 of an entry file (runtime/cache_disk.ts): "KILNPROG" | format u32 | key length u32 |
 * key | body length u64 | body | HMAC-SHA256 (32). The attacker has no secret (it is 0600 in a
 * 0700 directory), so it reseals as well as it can: the body length recomputed, and in the MAC's
 * place the old MAC, a SHA-256 of everything before it, or an HMAC under a guessed key.
 */
const MAC_BYTES = 32;
const bodyStart = (b: Buffer) => 16 + b.readUInt32LE(12) + 8;

function reseal(file: Buffer, r: () => number): Buffer {
  if (file.length < 16) return file;
  if (file.subarray(0, 8).toString("latin1") !== "KILNPROG" || file.readUInt32LE(8) !== 2) {
    return file;
  }
  const at = bodyStart(file);
  if (file.length < at + MAC_BYTES) return file; // truncated by the mutation: left as it is
  const out = Buffer.from(file);
  out.writeBigUInt64LE(BigInt(file.length - at - MAC_BYTES), at - 8);
  const signed = out.subarray(0, out.length - MAC_BYTES);
  const how = Math.floor(r() * 3);
  if (how === 1) createHash("sha256").update(signed).digest().copy(out, signed.length);
  if (how === 2) createHmac("sha256", Buffer.alloc(32)).update(signed).digest().copy(out, signed.length);
  return out;
}

async function caseCacheTamper(r: () => number, index: number): Promise<Result> {
  await import("../runtime/index.ts"); // registers the backends
  const { ProgramCache } = await import("../runtime/cache.ts");
  const { parseHlo } = await import("../ir/parse.ts");
  const { literal } = await import("../ir/literal.ts");
  const mod = (op: string) =>
    parseHlo(
      `HloModule ${op}_mod\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n` +
        `  ROOT r = f32[4] ${op}(x, y)\n}\n`,
    );
  const dir = mkdtempSync(join(tmpdir(), "kiln-fuzz-cache-"));
  const marker = join(dir, "PLANTED");
  try {
    const writer = new ProgramCache({ disk: dir, onWarning: () => {} });
    const add = writer.getOrCompile(mod("add"), "js");
    writer.getOrCompile(mod("subtract"), "js");
    const files = readdirSync(dir).filter((f) => !f.startsWith("."));
    const entryFor = (op: string) =>
      files.find((f) => readFileSync(join(dir, f)).includes(Buffer.from(`${op}_mod`)));
    const addFile = entryFor("add");
    const subFile = entryFor("subtract");
    if (addFile === undefined || subFile === undefined) {
      return { outcome: "wrong", detail: `no entry files for the two programs in ${files}` };
    }
    const kind = index % 4;
    const addPath = join(dir, addFile);
    const original = readFileSync(addPath);
    let tampered: Buffer;
    if (kind === 0) {
      // Planted code before the generated source, lengths recomputed, resealed.
      const source = (add.executable as { source?: string }).source ?? "";
      const src = Buffer.from(source);
      const at = original.indexOf(src);
      if (source === "" || at < 0) return { outcome: "wrong", detail: "no source in the entry" };
      const plant = Buffer.from(
        `globalThis.process.getBuiltinModule("fs").writeFileSync(${JSON.stringify(marker)}, "x");`,
      );
      tampered = Buffer.concat([original.subarray(0, at), plant, original.subarray(at)]);
      // The js payload (runtime/js/payload.ts) keeps the source's length at offset 24.
      const payload = tampered.indexOf(Buffer.from("KILNJSPG"));
      if (payload >= 0 && tampered.readUInt32LE(payload + 24) === src.length) {
        tampered.writeUInt32LE(src.length + plant.length, payload + 24);
      }
      tampered = reseal(tampered, r);
    } else if (kind === 1) {
      // The subtract entry's body and MAC under add's name and key (resealed, or as it was).
      const sub = readFileSync(join(dir, subFile));
      const swapped = Buffer.concat([original.subarray(0, bodyStart(original)),
        sub.subarray(bodyStart(sub))]);
      tampered = r() < 0.25 ? swapped : reseal(swapped, r);
    } else if (kind === 2) {
      // Random bytes as the stored module proto (the body: module length u32, module, payload).
      const head = bodyStart(original);
      const len = original.readUInt32LE(head);
      const junk = Buffer.from(Array.from({ length: 16 + Math.floor(r() * 64) }, () => r() * 256));
      const lenBytes = Buffer.alloc(4);
      lenBytes.writeUInt32LE(junk.length);
      tampered = reseal(
        Buffer.concat([
          original.subarray(0, head),
          lenBytes,
          junk,
          original.subarray(head + 4 + len),
        ]),
        r,
      );
    } else {
      tampered = reseal(Buffer.from(mutateBytes(original, r)), r);
    }
    if (tampered.equals(original)) return ok("the mutation changed nothing");
    writeFileSync(addPath, tampered);
    const reader = new ProgramCache({ disk: dir, memory: false, onWarning: () => {} });
    const x = literal("f32", [4], [1, 2, 3, 4]);
    const y = literal("f32", [4], [10, 20, 30, 40]);
    let got;
    let hit;
    try {
      const res = reader.getOrCompile(mod("add"), "js");
      hit = res.hit;
      got = res.executable.run([x, y]);
    } catch (e) {
      return rejected(e);
    }
    if (existsSync(marker)) return { outcome: "accepted-wrong", detail: "planted code ran" };
    const values = Array.isArray(got) ? [] : Array.from(got.toNumbers());
    if (values.join(",") !== "11,22,33,44") {
      return { outcome: "accepted-wrong", detail: `add returned [${values}] (hit: ${hit})` };
    }
    if (hit === "disk") {
      return { outcome: "accepted-wrong", detail: "a tampered entry was served from disk" };
    }
    return { outcome: "rejected", detail: "discarded and recompiled" };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function casePrograms(
  r: () => number,
  seed: number,
  index: number,
  backends: readonly string[] | undefined,
): Promise<Result> {
  const fc = (await import("fast-check")).default;
  const { CASES, UNSUPPORTED, identical } = await import("../test/runtime/fixtures/op_cases.ts");
  const { evaluate } = await import("../ir/evaluate.ts");
  const { printHlo } = await import("../ir/print.ts");
  const { backendNames, backendTier, getBackend } = await import("../runtime/index.ts");
  const { toleranceProblem } = await import("../runtime/tiers.ts");
  const { UnsupportedError } = await import("../runtime/backend.ts");
  const ops = Object.keys(CASES).sort() as (keyof typeof CASES)[];
  const op = ops[index % ops.length]!;
  const arb = CASES[op];
  if (arb === UNSUPPORTED) return ok(`${op}: no random cases`);
  const [c] = fc.sample(arb as Exclude<typeof arb, typeof UNSUPPORTED>, {
    seed: (seed * 7919 + index) | 0,
    numRuns: 1,
  });
  void r;
  let want;
  try {
    want = evaluate(c!.module, c!.inputs);
  } catch (e) {
    return rejected(e);
  }
  for (const name of backends ?? backendNames()) {
    let got;
    try {
      got = getBackend(name).compile(c!.module).run(c!.inputs);
    } catch (e) {
      if (e instanceof UnsupportedError) continue; // a documented gap of that backend
      const res = rejected(e);
      const detail = `${name} on ${op}: ${res.detail}`;
      if (res.outcome === "crashed") return { outcome: "crashed", detail };
      return { outcome: "wrong", detail: `raised where the evaluator did not: ${detail}` };
    }
    const why =
      backendTier(name) === "exact"
        ? identical(got, want)
          ? null
          : "not bit-identical"
        : toleranceProblem(c!.module, c!.inputs, got, want);
    if (why !== null) {
      const text = printHlo(c!.module);
      return { outcome: "wrong", detail: `${name} vs evaluator on ${op}: ${why}\n${text}` };
    }
  }
  return ok();
}

export async function runCase(job: WorkerJob): Promise<Result> {
  const r = rngFor(job.category, job.seed, job.index);
  switch (job.category) {
    case "hlo-text":
      return caseHloText(r);
    case "hlo-proto":
      return caseHloProto(r);
    case "safetensors":
      return caseSafetensors(r, job.index);
    case "eager-misuse":
      return caseEagerMisuse(r, job.index);
    case "cache-tamper":
      return caseCacheTamper(r, job.index);
    case "programs":
      return casePrograms(r, job.seed, job.index, job.backends);
    default: {
      const never: never = job.category;
      throw new Error(`unknown category ${String(never)}`);
    }
  }
}

/** Loads what a category's cases import, so the first case is timed like the others. */
async function warm(category: Category): Promise<void> {
  await import("../ir/parse.ts");
  await import("../ir/proto.ts");
  await import("../ir/verify.ts");
  if (category === "safetensors" || category === "eager-misuse") {
    await import("../tensor/index.ts");
    await import("../tensor/safetensors.ts");
  }
  if (category === "eager-misuse") {
    // The first error of a process is slow (dispatch tables, source maps for the stack): once
    // each here, so a case's time is its own.
    const { MISUSES } = await import("../test/fixtures/fuzz_misuse.ts");
    for (const misuse of MISUSES) {
      try {
        misuse();
      } catch {
        // expected: each one throws
      }
    }
  }
  if (category === "cache-tamper" || category === "programs") {
    await import("../runtime/index.ts");
    await import("../runtime/cache.ts");
  }
  if (category === "programs") {
    await import("fast-check");
    await import("../test/runtime/fixtures/op_cases.ts");
    await import("../runtime/tiers.ts");
  }
}

function workerMain(): void {
  process.on("message", (job: WorkerJob | { warm: Category }) => {
    if ("warm" in job) {
      warm(job.warm).then(
        () => process.send!({ outcome: "accepted", detail: "ready" }),
        (e: unknown) => process.send!({ outcome: "crashed", detail: describeError(e) }),
      );
      return;
    }
    if (job.selfTest === "hang") for (;;);
    if (job.selfTest === "abort") process.abort();
    runCase(job).then(
      (res) => process.send!(res),
      (e: unknown) => process.send!({ outcome: "crashed", detail: describeError(e) }),
    );
  });
}

// ---- the command line ----------------------------------------------------------------------

function parseArgs(argv: readonly string[]): FuzzOptions & { verbose: boolean } {
  const opts: FuzzOptions & { verbose: boolean } = { verbose: false };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k]!;
    const value = (): string => {
      const v = argv[++k];
      if (v === undefined) throw new Error(`fuzz: ${a} needs a value`);
      return v;
    };
    if (a === "--seed") opts.seed = Number(value());
    else if (a === "--budget") {
      const v = value();
      opts.budget = /^\d+$/.test(v) ? Number(v) : v;
    } else if (a === "--category") {
      const names = value().split(",");
      for (const n of names) {
        if (!(CATEGORIES as readonly string[]).includes(n)) {
          throw new Error(`fuzz: unknown category '${n}' (${CATEGORIES.join(", ")})`);
        }
      }
      opts.categories = names as Category[];
    } else if (a === "--backends") opts.backends = value().split(",");
    else if (a === "--timeout") opts.timeoutMs = Number(value());
    else if (a === "--only") opts.only = Number(value());
    else if (a === "--verbose") opts.verbose = true;
    else throw new Error(`fuzz: unknown option '${a}'`);
  }
  return opts;
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain && process.argv.includes("--worker")) {
  workerMain();
} else if (isMain) {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = performance.now();
  runFuzz(opts).then(
    (reports) => {
      console.log(
        `kiln fuzz: seed ${opts.seed ?? 1}, budget ${opts.budget ?? 50}, ` +
          `${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
      console.log(formatReports(reports, opts.verbose));
      const bad = reports.some((r) => r.failures.length > 0);
      process.exitCode = bad ? 1 : 0;
    },
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exitCode = 2;
    },
  );
}
