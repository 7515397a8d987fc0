// Where the parsing half of the source analysis (compiler/analyze_core.ts) runs: in a worker
// thread, asked synchronously, so the TypeScript compiler it needs is never loaded into the
// user's isolate. Loaded there, it made the user's own hot code 10-20% slower for the rest of
// the process (a `js` kernel's dot loop: 6.1-6.5 ms against 7.0-7.4 ms per 256^3 product, min
// of 50 calls, after a bare `require("typescript")`; in a worker thread it costs nothing),
// which made `js` compiled slower than `js` eager on every bench row (docs/performance.md).
//
// compile() is synchronous, so the call blocks on `Atomics.wait` until the worker answers, and
// the answer is read with `receiveMessageOnPort` (no event-loop turn). The worker is started
// on the first analysis and unref'd (it never keeps the process alive). Where no worker can
// run (no worker_threads, a TypeScript source tree without tsx to load it in the worker, a
// worker that does not start or answer in time) the analysis runs here instead, as before, and
// `KILN_LOGS=analysis` says why; `KILN_ANALYSIS=inline` asks for that on purpose.

import { analyseSource, type Analysed, type AnalysisRequest } from "./analyze_core.ts";
import { fileUrlToPath, nodeModule } from "./node_builtins.ts";
import { log } from "../util/log.ts";

/** How long the worker's start (it loads TypeScript) and then each answer may take. */
const TIMEOUT_MS = 60_000;

interface Channel {
  port: import("node:worker_threads").MessagePort;
  flag: Int32Array;
  worker: import("node:worker_threads").Worker;
}

/** The worker, once started; null once it is known not to work (then: inline). */
let channel: Channel | null | undefined;
/** Why the analysis runs inline (for `analysisHost()`). */
let inlineReason: string | undefined;

/** The analysis of `req`, in the worker where there is one. */
export function analyseRequest(req: AnalysisRequest): Analysed {
  const ch = channel === undefined ? (channel = start()) : channel;
  if (ch) {
    const answer = ask(ch, req);
    if (answer.ok) return answer.value;
    if (answer.fatal) stop(ch, answer.error);
    else throw new Error(answer.error);
  }
  return analyseSource(req);
}

/** Where analyses run in this process: "worker", "inline: <why>", or "not started". */
export function analysisHost(): string {
  if (channel === undefined) return "not started";
  return channel ? "worker" : `inline: ${inlineReason ?? "unknown"}`;
}

type Answer =
  | { ok: true; value: Analysed }
  | { ok: false; fatal: boolean; error: string };

function ask(ch: Channel, req: AnalysisRequest): Answer {
  const wt = nodeModule("node:worker_threads")!;
  const seen = Atomics.load(ch.flag, 0);
  ch.port.postMessage(req);
  const got = awaitFlag(ch.flag, seen);
  if (got !== "ok") return { ok: false, fatal: true, error: got };
  const msg = wt.receiveMessageOnPort(ch.port)?.message as
    | { value?: Analysed; error?: string }
    | undefined;
  if (!msg) return { ok: false, fatal: true, error: "the analysis worker sent no answer" };
  if (msg.error !== undefined) return { ok: false, fatal: false, error: msg.error };
  return { ok: true, value: msg.value! };
}

/** Blocks until the worker bumps the flag past `seen`; "ok" or why not. */
function awaitFlag(flag: Int32Array, seen: number): string {
  const deadline = Date.now() + TIMEOUT_MS;
  while (Atomics.load(flag, 0) === seen) {
    const left = deadline - Date.now();
    if (left <= 0) return `the analysis worker did not answer within ${TIMEOUT_MS / 1000} s`;
    Atomics.wait(flag, 0, seen, left);
  }
  return "ok";
}

function stop(ch: Channel, why: string): void {
  void ch.worker.terminate();
  channel = null;
  inlineReason = why;
  log("analysis", `source analysis runs in this thread from now on: ${why}`);
}

function inline(why: string): null {
  inlineReason = why;
  log("analysis", `source analysis runs in this thread: ${why}`);
  return null;
}

function start(): Channel | null {
  if (process.env["KILN_ANALYSIS"] === "inline") return inline("KILN_ANALYSIS=inline");
  const wt = nodeModule("node:worker_threads");
  if (!wt) return inline("no worker_threads here");
  const entry = workerEntry();
  if (typeof entry === "string") return inline(entry);
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new wt.MessageChannel();
  let worker: import("node:worker_threads").Worker;
  try {
    worker = new wt.Worker(entry, {
      workerData: { port: port2, flag },
      transferList: [port2],
    });
  } catch (e) {
    return inline(`the analysis worker could not start: ${(e as Error).message}`);
  }
  // Without a listener, an error in the worker would be thrown in this thread.
  worker.on("error", (e) => {
    if (channel?.worker === worker) stop(channel, `the analysis worker failed: ${e.message}`);
  });
  worker.unref();
  port1.unref();
  log("analysis", "source analysis runs in a worker thread");
  return { port: port1, flag, worker };
}

/**
 * The worker's module: the compiled analyze_worker.js next to this file (the published
 * build), or — running from the TypeScript sources, where Node 20 gives a worker no loader
 * for .ts files — analyze_worker.ts and what it imports bundled in memory by esbuild (a
 * development dependency, there through tsx) into one ES module handed over as a data: URL.
 * A string: why there is none.
 */
function workerEntry(): URL | string {
  const own = import.meta.url;
  if (!own.endsWith(".ts")) return new URL("./analyze_worker.js", own);
  const m = nodeModule("node:module");
  if (!m) return "no node:module here";
  const workerUrl = new URL("./analyze_worker.ts", own);
  let esbuild: typeof import("esbuild");
  try {
    esbuild = m.createRequire(fileUrlToPath(own))("esbuild") as typeof import("esbuild");
  } catch {
    return "the compiler runs from its TypeScript sources and esbuild is not installed";
  }
  try {
    const out = esbuild.buildSync({
      entryPoints: [fileUrlToPath(workerUrl.href)],
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20",
      write: false,
      logLevel: "silent",
      // Every bundled file is in compiler/: its URL resolves ts-morph and Kiln's root as theirs.
      define: { "import.meta.url": JSON.stringify(workerUrl.href) },
    });
    const code = out.outputFiles[0]!.text;
    return new URL(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);
  } catch (e) {
    return `the analysis worker could not be bundled: ${(e as Error).message}`;
  }
}
