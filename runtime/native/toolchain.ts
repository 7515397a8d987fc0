// The `native` backend's toolchain: finds the system C compiler at run time (KILN_CC, else cc,
// gcc, clang on PATH), probes it once per process (version, whether it builds a shared object
// with `-march=native`), reads the CPU's features and the Node-API headers, and derives the
// toolchain key that goes into every native cache key. It also runs compiles: many translation
// units in parallel from synchronous code (one `sh` driving a pool of jobs, because Kiln's
// compile() is synchronous) or in the background (the same driver under `spawn`), each output
// appearing at its path only through an atomic rename, so a reader never sees a partial one.
// `nativeStatus()` says, in words, whether the whole chain (compiler, headers, runtime addon)
// works here; it never throws.

import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  accessSync,
  constants as fsConstants,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../../util/log.ts";
// A cycle (addon.ts builds with this file's compiler): neither file uses the other's bindings
// while loading, only in functions called later.
import { loadNativeAddon } from "./addon.ts";
import { defaultLibCache } from "./libcache.ts";

/** The runtime library's sources and headers (kiln_rt.h); always on the include path. */
export const CSRC_DIR = fileURLToPath(new URL("./csrc/", import.meta.url));

export type CompilerKind = "gcc" | "clang" | "other";

export interface Compiler {
  /** What was asked for: KILN_CC's value, or cc / gcc / clang. */
  readonly name: string;
  /** The executable that runs. */
  readonly path: string;
  readonly kind: CompilerKind;
  /** `-dumpversion`. */
  readonly version: string;
  /** The first line of `--version`. */
  readonly versionText: string;
  /** All of `--version` (part of the key: it names the build, not only the release). */
  readonly versionFull: string;
}

export type Isa = "avx512" | "avx2" | "portable";

export interface CpuInfo {
  readonly arch: string;
  readonly platform: string;
  /** Every feature flag the OS reports, lower case, sorted (what `-march=native` reads). */
  readonly flags: readonly string[];
  /** The flags that matter to Kiln's kernels, for logs and `kiln cache info`. */
  readonly features: readonly string[];
  readonly model: string;
  readonly source: "cpuinfo" | "sysctl" | "unknown";
}

export interface Toolchain {
  readonly compiler: Compiler;
  readonly cpu: CpuInfo;
  readonly isa: Isa;
  /** Whether `-march=native` is in cflags. */
  readonly marchNative: boolean;
  /** Flags for compiling a translation unit (with or without linking). */
  readonly cflags: readonly string[];
  /** Flags for linking a shared object, placed after the inputs. */
  readonly ldflags: readonly string[];
  /** The directory holding node_api.h. */
  readonly nodeInclude: string;
  readonly napiVersion: string;
  /** SHA-256 (hex) of everything above that changes the machine code a compile produces. */
  readonly key: string;
}

export type Probed<T> = { ok: true; value: T } | { ok: false; reason: string };

const CANDIDATES = ["cc", "gcc", "clang"] as const;
const PROBE_TIMEOUT_MS = 20_000;
/** The default limit on one parallel compile (all of its jobs together). */
export const DEFAULT_COMPILE_TIMEOUT_MS = 10 * 60 * 1000;

// Flags every build gets; -march=native is added in front when the compiler accepts it.
const BASE_CFLAGS = [
  "-O3",
  "-fPIC",
  "-std=gnu11",
  "-pthread",
  "-ffp-contract=fast",
  // sqrtf then compiles to the vector instruction: errno (never read) kept it a scalar call,
  // and the loop around it scalar (sqrt(x) + eps over 38.6M floats: 60-84 ms -> 28 ms).
  "-fno-math-errno",
  "-fvisibility=hidden",
] as const;

// The features worth naming in logs; the key uses every flag.
const INTERESTING = [
  "sse4_2",
  "avx",
  "avx2",
  "fma",
  "f16c",
  "avx512f",
  "avx512bw",
  "avx512vl",
  "avx512dq",
  "avx512cd",
  "avx512_vnni",
  "avx512_bf16",
  "avx512_fp16",
  "amx_tile",
  "asimd",
  "neon",
  "fphp",
  "sve",
] as const;

function uidTag(): string {
  return process.getuid ? String(process.getuid()) : "user";
}

/** A fresh private (0700) directory under os.tmpdir(), named for the user. */
export function privateTempDir(tag: string): string {
  return mkdtempSync(join(tmpdir(), `kiln-${uidTag()}-${tag}-`));
}

function firstLine(text: string): string {
  return text.split("\n").find((l) => l.trim() !== "")?.trim() ?? "";
}

/** The line of a compiler's stderr worth quoting: the first error, else the first line. */
export function firstErrorLine(stderr: string): string {
  const lines = stderr.split("\n").map((l) => l.trim());
  return lines.find((l) => /\berror\b/i.test(l)) ?? firstLine(stderr);
}

// ---- The compiler ----------------------------------------------------------------------------

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Resolves a command name on PATH, or a path (anything with a slash) as it is. */
export function whichExecutable(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (name.includes("/")) {
    const p = resolve(name);
    return isExecutableFile(p) ? p : undefined;
  }
  for (const dir of (env["PATH"] ?? "").split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const p = join(dir, name);
    if (isExecutableFile(p)) return p;
  }
  return undefined;
}

function runText(path: string, args: readonly string[]): { ok: boolean; out: string; err: string } {
  const r = spawnSync(path, args, {
    encoding: "utf8",
    timeout: PROBE_TIMEOUT_MS,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LC_ALL: "C" },
  });
  if (r.error) return { ok: false, out: "", err: r.error.message };
  return { ok: r.status === 0, out: r.stdout ?? "", err: r.stderr ?? "" };
}

/** Finds and probes the C compiler (not memoized; `toolchain()` is). */
export function findCompiler(env: NodeJS.ProcessEnv = process.env): Probed<Compiler> {
  const own = env["KILN_CC"];
  let name: string;
  let path: string | undefined;
  if (own !== undefined && own !== "") {
    name = own;
    path = whichExecutable(own, env);
    if (path === undefined) {
      return {
        ok: false,
        reason: `no C compiler found (KILN_CC=${own} is not an executable file or command on PATH)`,
      };
    }
  } else {
    name = "";
    for (const c of CANDIDATES) {
      path = whichExecutable(c, env);
      if (path !== undefined) {
        name = c;
        break;
      }
    }
    if (path === undefined) {
      return {
        ok: false,
        reason: "no C compiler found (KILN_CC unset; cc, gcc, clang not on PATH)",
      };
    }
  }
  const v = runText(path, ["--version"]);
  if (!v.ok) {
    const why = firstLine(v.err) || "it exited with an error";
    return { ok: false, reason: `the C compiler ${name} (${path}) does not run: ${why}` };
  }
  const dv = runText(path, ["-dumpversion"]);
  const full = v.out.trim();
  const kind: CompilerKind = /clang/i.test(full)
    ? "clang"
    : /\bgcc\b|GCC|Free Software Foundation/.test(full)
      ? "gcc"
      : "other";
  return {
    ok: true,
    value: {
      name,
      path,
      kind,
      version: dv.ok ? dv.out.trim() : "",
      versionText: firstLine(full),
      versionFull: full,
    },
  };
}

/** "cc 12.2.0": the compiler as a person names it in a message. */
export function describeCompiler(c: Compiler): string {
  const release = /\d+\.\d+(\.\d+)?/.exec(c.versionText)?.[0] ?? c.version;
  const name = basename(c.name);
  return release === "" ? name : `${name} ${release}`;
}

// ---- The CPU ---------------------------------------------------------------------------------

function parseCpuinfo(text: string): { flags: string[]; model: string } {
  let flags: string[] = [];
  let model = "";
  for (const line of text.split("\n")) {
    const m = /^([^:]+?)\s*:\s*(.*)$/.exec(line);
    if (!m) continue;
    const [, field, value] = m as unknown as [string, string, string];
    if (flags.length === 0 && (field === "flags" || field === "Features")) {
      flags = value.split(/\s+/).filter((f) => f !== "");
    } else if (model === "" && (field === "model name" || field === "CPU part")) {
      model = value.trim();
    }
  }
  return { flags, model };
}

function parseSysctl(text: string): { flags: string[]; model: string } {
  const flags: string[] = [];
  let model = "";
  for (const line of text.split("\n")) {
    const m = /^machdep\.cpu\.([a-z0-9_.]+):\s*(.*)$/.exec(line);
    if (!m) continue;
    const [, field, value] = m as unknown as [string, string, string];
    if (field === "features" || field === "leaf7_features" || field === "extfeatures") {
      flags.push(...value.split(/\s+/).filter((f) => f !== ""));
    } else if (field === "brand_string") {
      model = value.trim();
    }
  }
  return { flags, model };
}

/** The CPU's features as the OS reports them. */
export function cpuInfo(): CpuInfo {
  let parsed: { flags: string[]; model: string } = { flags: [], model: "" };
  let source: CpuInfo["source"] = "unknown";
  try {
    if (process.platform === "linux") {
      parsed = parseCpuinfo(readFileSync("/proc/cpuinfo", "utf8"));
      source = "cpuinfo";
    } else if (process.platform === "darwin") {
      const r = spawnSync("sysctl", ["-a", "machdep.cpu"], { encoding: "utf8", timeout: 5000 });
      if (r.status === 0) {
        parsed = parseSysctl(r.stdout);
        source = "sysctl";
      }
    }
  } catch {
    source = "unknown";
  }
  const flags = [...new Set(parsed.flags.map((f) => f.toLowerCase().replace(/\./g, "_")))].sort();
  if (flags.length === 0) source = "unknown";
  const have = new Set(flags);
  return {
    arch: process.arch,
    platform: process.platform,
    flags,
    features: INTERESTING.filter((f) => have.has(f)),
    model: parsed.model,
    source,
  };
}

/** The ISA class kernels are built for: what the CPU has and `-march=native` lets them use. */
export function isaClass(cpu: CpuInfo, marchNative: boolean): Isa {
  if (!marchNative || (cpu.arch !== "x64" && cpu.arch !== "ia32")) return "portable";
  const has = new Set(cpu.flags);
  if (["avx512f", "avx512bw", "avx512vl", "avx512dq"].every((f) => has.has(f))) return "avx512";
  if (has.has("avx2") && has.has("fma")) return "avx2";
  return "portable";
}

// ---- Node-API headers ------------------------------------------------------------------------

/** The directory holding node_api.h: KILN_NODE_INCLUDE, else next to the node binary, .... */
export function findNodeInclude(env: NodeJS.ProcessEnv = process.env): Probed<string> {
  const own = env["KILN_NODE_INCLUDE"];
  const looked: string[] = [];
  const candidates: string[] = [];
  if (own !== undefined && own !== "") {
    candidates.push(resolve(own));
  } else {
    candidates.push(join(dirname(process.execPath), "..", "include", "node"));
    const vars = (process.config as { variables?: Record<string, unknown> }).variables;
    const prefix = vars?.["node_prefix"];
    if (typeof prefix === "string" && prefix !== "") {
      candidates.push(join(prefix, "include", "node"));
    }
    candidates.push("/usr/include/node", "/usr/local/include/node");
  }
  for (const c of candidates) {
    const dir = resolve(c);
    if (looked.includes(dir)) continue;
    looked.push(dir);
    if (existsSync(join(dir, "node_api.h")) && existsSync(join(dir, "js_native_api.h"))) {
      return { ok: true, value: dir };
    }
  }
  const how = own !== undefined && own !== "" ? "KILN_NODE_INCLUDE: " : "";
  return { ok: false, reason: `Node-API headers not found (looked in ${how}${looked.join(", ")})` };
}

// ---- The key ---------------------------------------------------------------------------------

/** Everything about the toolchain that changes the bytes a compile produces. */
export interface ToolchainKeyParts {
  readonly compilerPath: string;
  readonly compilerVersion: string;
  readonly cflags: readonly string[];
  readonly ldflags: readonly string[];
  readonly cpuFlags: readonly string[];
  readonly cpuModel: string;
  readonly arch: string;
  readonly platform: string;
  readonly napiVersion: string;
  readonly modules: string;
}

export function toolchainKeyOf(p: ToolchainKeyParts): string {
  const text = JSON.stringify([
    "kiln-native-toolchain/1",
    p.compilerPath,
    p.compilerVersion,
    p.cflags,
    p.ldflags,
    p.cpuFlags,
    p.cpuModel,
    p.arch,
    p.platform,
    p.napiVersion,
    p.modules,
  ]);
  return createHash("sha256").update(text).digest("hex");
}

// ---- The probe -------------------------------------------------------------------------------

function ldflagsFor(platform: string): string[] {
  const out = ["-shared", "-pthread"];
  // Node-API symbols resolve against the running node at load time.
  if (platform === "darwin") out.push("-undefined", "dynamic_lookup");
  out.push("-lm");
  return out;
}

// undefined when it builds, else the compiler's first error line
function tryBuild(
  cc: string,
  cflags: readonly string[],
  ldflags: readonly string[],
): string | undefined {
  const dir = privateTempDir("probe");
  try {
    const src = join(dir, "probe.c");
    writeFileSync(src, "int kiln_probe(int x) { return x + 1; }\n");
    const r = spawnSync(cc, [...cflags, "-o", join(dir, "probe.so"), src, ...ldflags], {
      encoding: "utf8",
      timeout: PROBE_TIMEOUT_MS,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_ALL: "C" },
    });
    if (r.error) return r.error.message;
    if (r.status !== 0 || !existsSync(join(dir, "probe.so"))) {
      return firstErrorLine(`${r.stderr ?? ""}\n${r.stdout ?? ""}`) || `exit status ${r.status}`;
    }
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Probes the whole toolchain (not memoized: tests call it with an env; use `toolchain()`). */
export function probeToolchain(env: NodeJS.ProcessEnv = process.env): Probed<Toolchain> {
  const found = findCompiler(env);
  if (!found.ok) return found;
  const compiler = found.value;
  const headers = findNodeInclude(env);
  if (!headers.ok) return headers;
  const ldflags = ldflagsFor(process.platform);
  let cflags: string[] = ["-O3", "-march=native", ...BASE_CFLAGS.slice(1)];
  let marchNative = true;
  const first = tryBuild(compiler.path, cflags, ldflags);
  if (first !== undefined) {
    cflags = [...BASE_CFLAGS];
    marchNative = false;
    const second = tryBuild(compiler.path, cflags, ldflags);
    if (second !== undefined) {
      return {
        ok: false,
        reason: `${describeCompiler(compiler)} could not build a shared object: ${second}`,
      };
    }
  }
  const cpu = cpuInfo();
  const napiVersion = process.versions.napi ?? "";
  const key = toolchainKeyOf({
    compilerPath: compiler.path,
    compilerVersion: `${compiler.versionFull}\n${compiler.version}`,
    cflags,
    ldflags,
    cpuFlags: cpu.flags,
    cpuModel: cpu.model,
    arch: process.arch,
    platform: process.platform,
    napiVersion,
    modules: process.versions.modules ?? "",
  });
  return {
    ok: true,
    value: {
      compiler,
      cpu,
      isa: isaClass(cpu, marchNative),
      marchNative,
      cflags,
      ldflags,
      nodeInclude: headers.value,
      napiVersion,
      key,
    },
  };
}

let memo: Probed<Toolchain> | undefined;

/**
 * What a successful probe depends on, cheap to read without running anything: the compiler
 * file found (path and stat), the environment that steers the search, the CPU's flags, Node's
 * ABI. A probe is remembered under it in the library cache (authenticated like every entry),
 * so a new process does not spend ~80 ms running the compiler to learn what it knew.
 */
function probeMemoKey(env: NodeJS.ProcessEnv): string | undefined {
  const own = env["KILN_CC"];
  const path =
    own !== undefined && own !== ""
      ? whichExecutable(own, env)
      : CANDIDATES.map((c) => whichExecutable(c, env)).find((p) => p !== undefined);
  if (path === undefined) return undefined;
  let st: { size: number; mtimeMs: number; ino: number };
  try {
    st = statSync(path);
  } catch {
    return undefined;
  }
  const cpu = cpuInfo();
  return createHash("sha256")
    .update(JSON.stringify([
      // The base flags: a Kiln that builds with other flags probes again.
      "kiln-toolchain-probe/1", BASE_CFLAGS.join(" "), path, st.size, st.mtimeMs, st.ino, own ?? "",
      env["KILN_NODE_INCLUDE"] ?? "", env["PATH"] ?? "", cpu.flags, cpu.model, process.arch,
      process.platform, process.versions.modules ?? "", process.versions.napi ?? "",
      process.execPath,
    ]))
    .digest("hex");
}

/** The toolchain of this process, probed once (and remembered across processes). */
export function toolchain(): Probed<Toolchain> {
  if (memo === undefined) {
    try {
      const key = probeMemoKey(process.env);
      const cache = key !== undefined ? probeCache() : undefined;
      const known = key !== undefined ? cache?.get(`toolchain-probe ${key}`) : undefined;
      if (known) {
        memo = { ok: true, value: JSON.parse(new TextDecoder().decode(known)) as Toolchain };
      } else {
        memo = probeToolchain();
        if (memo.ok && key !== undefined && cache) {
          cache.put(`toolchain-probe ${key}`, new TextEncoder().encode(JSON.stringify(memo.value)));
        }
      }
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      memo = { ok: false, reason: `the toolchain probe failed: ${why}` };
    }
  }
  return memo;
}

/** The library cache, for the probe memo (undefined when it cannot be used). */
function probeCache(): { get(k: string): Uint8Array | undefined; put(k: string, b: Uint8Array): void }
  | undefined {
  try {
    return defaultLibCache();
  } catch {
    return undefined;
  }
}

/** The toolchain key (part of every native cache key), or undefined with no toolchain. */
export function toolchainKey(): string | undefined {
  const t = toolchain();
  return t.ok ? t.value.key : undefined;
}

// ---- Parallel compiles -----------------------------------------------------------------------

export interface CompileJob {
  /** The C source text. */
  readonly source: string;
  /** Where the shared object goes; it appears there only complete (atomic rename). */
  readonly out: string;
}

export interface CompileOptions {
  /** Compiles at once (default os.availableParallelism()). */
  readonly parallel?: number;
  readonly extraFlags?: readonly string[];
  /** Added after the runtime's own csrc/ (always on the path, for kiln_rt.h). */
  readonly includeDirs?: readonly string[];
  /** The limit on the whole batch; jobs still running then fail (default 10 min). */
  readonly timeoutMs?: number;
}

export interface CompileResult {
  readonly ok: boolean;
  /** The compiler's diagnostics (warnings too, when ok). */
  readonly stderr: string;
  /** The job's own wall time. */
  readonly ms: number;
}

/** One compiler run of a batch: its arguments (all but `-o`) and the file it produces. */
export interface CompilerCommand {
  readonly args: readonly string[];
  readonly out: string;
}

/** A batch compiling in the background; `poll()` tells synchronous code whether it is done. */
export interface BackgroundCompile {
  readonly promise: Promise<CompileResult[]>;
  /** The results once every job has finished (a file check, no event loop needed). */
  poll(): CompileResult[] | undefined;
}

function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

interface Batch {
  readonly dir: string;
  readonly commands: readonly CompilerCommand[];
  readonly temps: readonly string[];
  readonly timeoutMs: number;
  readonly started: number;
}

// Each job is a script of its own: it marks its start, runs the compiler into a temp file next
// to the output (so the final rename is atomic), renames it into place only while the batch is
// still live (a job a timeout raced past must not publish late), and writes its exit status
// last, through a rename, so a status file is never seen half written.
function prepareBatch(
  dir: string,
  cc: string,
  commands: readonly CompilerCommand[],
  parallel: number,
  timeoutMs: number,
): Batch {
  const temps: string[] = [];
  const tag = randomBytes(6).toString("hex");
  commands.forEach((c, i) => {
    const outDir = dirname(resolve(c.out));
    const tmp = join(outDir, `.${basename(c.out)}.${process.pid}.${tag}.${i}.tmp`);
    temps.push(tmp);
    const argv = [cc, ...c.args, "-o", tmp].map(shq).join(" ");
    const publish = `mv -f ${shq(tmp)} ${shq(resolve(c.out))}`;
    // Status files by absolute path: the compiler runs in the caller's working directory, so
    // relative paths in its flags mean what the caller meant.
    const script = [
      `D=${shq(dir)}`,
      `echo $$ > "$D/q${i}"`,
      `: > "$D/s${i}"`,
      `cd ${shq(process.cwd())} || exit 1`,
      `${argv} </dev/null >"$D/e${i}" 2>&1 &`,
      `echo $! > "$D/p${i}"`,
      `wait $!`,
      `rc=$?`,
      `if [ "$rc" -eq 0 ]; then`,
      `  if [ -e "$D/live" ]; then ${publish} 2>>"$D/e${i}" || rc=125;`,
      `  else rc=124; fi`,
      `fi`,
      `echo "$rc" > "$D/r${i}.t" && mv -f "$D/r${i}.t" "$D/r${i}"`,
      "",
    ].join("\n");
    writeFileSync(join(dir, `j${i}.sh`), script);
  });
  writeFileSync(join(dir, "live"), "");
  const n = Math.max(1, Math.min(parallel, commands.length));
  // A pool in plain POSIX sh (no xargs -P, no wait -n): n workers, each claiming the next
  // unclaimed job with an atomic mkdir, so a long job never holds up the short ones behind it.
  const workers = Array.from({ length: n }, (_, w) => `run & echo $! > w${w}`);
  const driver = [
    `cd ${shq(dir)} || exit 1`,
    // On a timeout: no live flag (nothing more starts or publishes), kill the workers, the
    // running compilers and their jobs, so nothing writes here once the driver has exited.
    `trap 'rm -f live; for f in w* p* q*; do [ -f "$f" ] && ` +
      `kill $(cat "$f") 2>/dev/null; done; exit 124' TERM INT`,
    `run() {`,
    `  i=0`,
    `  while [ "$i" -lt ${commands.length} ] && [ -e live ]; do`,
    `    if mkdir "c$i" 2>/dev/null; then sh "j$i.sh"; fi`,
    `    i=$((i + 1))`,
    `  done`,
    `}`,
    ...workers,
    `wait`,
    `: > done`,
    "",
  ].join("\n");
  writeFileSync(join(dir, "driver.sh"), driver);
  return { dir, commands, temps, timeoutMs, started: Date.now() };
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

function collect(b: Batch): CompileResult[] {
  const elapsed = Date.now() - b.started;
  // The driver's timeout trap removes the live flag first thing.
  const timedOut = !existsSync(join(b.dir, "live"));
  const results = b.commands.map((c, i): CompileResult => {
    const rcText = readOr(join(b.dir, `r${i}`), "").trim();
    const stderr = readOr(join(b.dir, `e${i}`), "");
    let ms = elapsed;
    try {
      const end = statSync(join(b.dir, `r${i}`)).mtimeMs;
      ms = Math.max(0, end - statSync(join(b.dir, `s${i}`)).mtimeMs);
    } catch {
      // the job never finished: its time is the batch's
    }
    const rc = rcText === "" ? undefined : Number(rcText);
    if (rc === 0 && existsSync(c.out)) return { ok: true, stderr, ms };
    const why = timedOut
      ? `\nkiln: the compile did not finish within ${b.timeoutMs} ms and was stopped`
      : rc === undefined
        ? "\nkiln: the compile did not run to the end"
        : rc === 0
          ? `\nkiln: the compiler succeeded but ${c.out} is missing`
          : "";
    return { ok: false, stderr: `${stderr}${why}`, ms };
  });
  for (const t of b.temps) {
    try {
      unlinkSync(t);
    } catch {
      // renamed into place, or never written
    }
  }
  removeQuietly(b.dir);
  return results;
}

function removeQuietly(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // a leftover private temp directory is harmless
  }
}

function failAll(n: number, reason: string): CompileResult[] {
  return Array.from({ length: n }, () => ({ ok: false, stderr: reason, ms: 0 }));
}

/** Runs compiler commands in parallel and waits (one `sh`, synchronous). */
export function runCompilerCommands(
  commands: readonly CompilerCommand[],
  opts: { parallel?: number; timeoutMs?: number } = {},
): CompileResult[] {
  if (commands.length === 0) return [];
  const tc = toolchain();
  if (!tc.ok) return failAll(commands.length, tc.reason);
  const dir = privateTempDir("cc");
  const timeoutMs = opts.timeoutMs ?? DEFAULT_COMPILE_TIMEOUT_MS;
  const b = prepareBatch(
    dir,
    tc.value.compiler.path,
    commands,
    opts.parallel ?? availableParallelism(),
    timeoutMs,
  );
  spawnSync("sh", [join(dir, "driver.sh")], {
    stdio: "ignore",
    timeout: timeoutMs,
    killSignal: "SIGTERM",
    env: { ...process.env, LC_ALL: "C" },
  });
  return collect(b);
}

/** Like runCompilerCommands, in the background. */
export function startCompilerCommands(
  commands: readonly CompilerCommand[],
  opts: { parallel?: number; timeoutMs?: number } = {},
): BackgroundCompile {
  if (commands.length === 0) {
    return { promise: Promise.resolve([]), poll: () => [] };
  }
  const tc = toolchain();
  if (!tc.ok) {
    const r = failAll(commands.length, tc.reason);
    return { promise: Promise.resolve(r), poll: () => r };
  }
  const dir = privateTempDir("cc");
  const timeoutMs = opts.timeoutMs ?? DEFAULT_COMPILE_TIMEOUT_MS;
  const b = prepareBatch(
    dir,
    tc.value.compiler.path,
    commands,
    opts.parallel ?? availableParallelism(),
    timeoutMs,
  );
  let results: CompileResult[] | undefined;
  const finish = (): CompileResult[] => (results ??= collect(b));
  const promise = new Promise<CompileResult[]>((resolvePromise) => {
    const child = spawn("sh", [join(dir, "driver.sh")], {
      stdio: "ignore",
      env: { ...process.env, LC_ALL: "C" },
    });
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    timer.unref();
    const done = (): void => {
      clearTimeout(timer);
      resolvePromise(finish());
    };
    child.on("exit", done);
    child.on("error", done);
  });
  return {
    promise,
    poll: () => (results !== undefined || existsSync(join(dir, "done")) ? finish() : undefined),
  };
}

function sharedObjectCommands(
  tc: Toolchain,
  jobs: readonly CompileJob[],
  dir: string,
  opts: CompileOptions,
): CompilerCommand[] {
  const includes = [CSRC_DIR, ...(opts.includeDirs ?? [])].map((d) => `-I${d}`);
  return jobs.map((job, i) => {
    const src = join(dir, `src${i}.c`);
    writeFileSync(src, job.source);
    return {
      args: [...tc.cflags, ...includes, ...(opts.extraFlags ?? []), src, ...tc.ldflags],
      out: job.out,
    };
  });
}

/**
 * Compiles C sources into shared objects, in parallel, and waits. A failed job has its
 * compiler's stderr and leaves nothing at its `out`; the others are unaffected.
 */
export function compileSharedObjects(
  jobs: readonly CompileJob[],
  opts: CompileOptions = {},
): CompileResult[] {
  if (jobs.length === 0) return [];
  const tc = toolchain();
  if (!tc.ok) return failAll(jobs.length, tc.reason);
  const dir = privateTempDir("src");
  try {
    return runCompilerCommands(sharedObjectCommands(tc.value, jobs, dir, opts), opts);
  } finally {
    removeQuietly(dir);
  }
}

/** compileSharedObjects in the background, with a synchronous `poll()`. */
export function startCompileSharedObjects(
  jobs: readonly CompileJob[],
  opts: CompileOptions = {},
): BackgroundCompile {
  const tc = toolchain();
  if (!tc.ok) {
    const r = failAll(jobs.length, tc.reason);
    return { promise: Promise.resolve(r), poll: () => r };
  }
  const dir = privateTempDir("src");
  const bg = startCompilerCommands(sharedObjectCommands(tc.value, jobs, dir, opts), opts);
  const cleanup = (): void => removeQuietly(dir);
  return {
    promise: bg.promise.finally(cleanup),
    poll: () => {
      const r = bg.poll();
      if (r !== undefined) cleanup();
      return r;
    },
  };
}

/** compileSharedObjects without blocking the event loop. */
export function compileSharedObjectsAsync(
  jobs: readonly CompileJob[],
  opts: CompileOptions = {},
): Promise<CompileResult[]> {
  return startCompileSharedObjects(jobs, opts).promise;
}

// ---- Status ----------------------------------------------------------------------------------

export type NativeStatus =
  | { ok: true; toolchain: Toolchain; isa: Isa; threads: number }
  | { ok: false; reason: string };

let status: NativeStatus | undefined;

function computeStatus(): NativeStatus {
  const tc = toolchain();
  if (!tc.ok) return tc;
  const addon = loadNativeAddon();
  if ("error" in addon) return { ok: false, reason: addon.error };
  return { ok: true, toolchain: tc.value, isa: tc.value.isa, threads: addon.getThreads() };
}

/**
 * Whether the native backend works in this process: a compiler, Node-API headers and a runtime
 * addon that builds and loads. Memoized; never throws; logged once under KILN_LOGS=backend.
 */
export function nativeStatus(): NativeStatus {
  if (status !== undefined) return status;
  try {
    status = computeStatus();
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    status = { ok: false, reason: `the native backend failed: ${why}` };
  }
  const s = status;
  log("backend", () => {
    if (!s.ok) return `native: unavailable: ${s.reason}`;
    const t = s.toolchain;
    return (
      `native: ${describeCompiler(t.compiler)} (${t.compiler.path}), ` +
      `${t.cflags.join(" ")}; isa ${s.isa} (${t.cpu.features.join(" ") || "no features known"}), ` +
      `${s.threads} threads`
    );
  });
  return s;
}
