// Threads for the wasm backend (issue #17): a persistent pool of workers over each executable's
// shared WebAssembly.Memory. Each worker instantiates an executable's module once against that
// memory (module and memory posted once, at the executable's first multi-threaded step); then a
// parallel step is data in a shared control block — parts, each a row of calls (function index,
// args), taken by whichever thread is free — an Atomics.notify, the main thread taking parts
// too, and a counter barrier (Atomics.wait in the workers and, where it may block, in the main
// thread). No postMessage per kernel.
//
// Everything platform-specific is behind WasmThreadHost: pool_node.ts (worker_threads) is the
// Node one, loaded lazily; a browser build supplies Web Workers through setWasmThreadHost (the
// interface below, docs/runtime.md §7). Where SharedArrayBuffer or shared wasm memory is
// unavailable (a browser page without cross-origin isolation), or no host can start workers,
// the backend runs single-threaded and says why (wasmThreadsUnavailable, KILN_LOGS=backend).
//
// The control block (Int32Array over a SharedArrayBuffer), CTL offsets:
//   SEQ step counter (workers wait on it), CMD (CALL, MAIL, STOP), PENDING (workers still to
//   finish the step), ERR (thread index + 1 of the first worker that failed), NT (threads in the
//   step, the main thread included), EXE (the executable the step runs);
//   NEXT (the next part to take), NPARTS, SLEEPERS (workers in Atomics.wait: a step notifies
//   only when there are some), MAIN_SLEEPING (the main thread waits: the last worker notifies);
//   STATE + w (worker w: 0 starting, 1 idle, 2 running,
//   3 dead, 4 receiving), SEEN + w (the last step it took), ROWS + p * ROW_INTS (part p's calls:
//   ncalls, then fn, nargs, args...). Parts are taken dynamically (Atomics.add on NEXT), as
//   native's pool does: a thread the OS delays takes fewer, and nobody waits on its share.

import { log } from "../../util/log.ts";
import { WASM_WORKER_CORE } from "./worker_source.ts";
import { nodeThreadHost } from "./pool_node.ts";

/** Most threads a step runs on (the main thread included), as native's pool. */
export const MAX_WASM_THREADS = 512;

const CTL = {
  SEQ: 0,
  CMD: 1,
  PENDING: 2,
  ERR: 3,
  NT: 4,
  EXE: 5,
  NEXT: 6,
  NPARTS: 7,
  SLEEPERS: 8,
  MAIN_SLEEPING: 9,
  STATE: 64,
  SEEN: 640,
  ROWS: 1216,
  ROW_INTS: 128,
} as const;
const CMD_CALL = 1;
const CMD_MAIL = 2;
const CMD_STOP = 3;
/** Most parts a step is cut into (each a row of calls; a GEMM gives each its own edge tile). */
export const MAX_WASM_PARTS = 512;
/** Parts per thread a step is cut into where there is work enough (a late thread takes fewer). */
export const PARTS_PER_THREAD = 4;
const CTL_INTS = CTL.ROWS + MAX_WASM_PARTS * CTL.ROW_INTS;
const TEXT_BYTES = 4096;

/** What a worker is started with (posted or passed as its data). */
export interface WasmWorkerInit {
  readonly ctl: SharedArrayBuffer;
  readonly text: SharedArrayBuffer;
  /** The worker's index (its thread index is index + 1; the main thread is 0). */
  readonly index: number;
  /** Microseconds an idle worker spins before it sleeps in Atomics.wait. */
  readonly spinUs: number;
  /** The step counter when it was started (the next step is the first it takes). */
  readonly seq: number;
}

/** A started worker, as the pool sees it. */
export interface WasmWorker {
  /** Posts a message (structured clone: WebAssembly.Module and a shared Memory pass). */
  post(message: unknown): void;
  /** Ends the worker (it may be blocked in Atomics.wait). */
  terminate(): void;
}

/**
 * What a platform provides for wasm threads. A host runs, in each worker, WASM_WORKER_SOURCE
 * (worker_source.ts) followed by a call `kilnWasmWorker(init, onMessage, onExit)`: `init` is
 * the WasmWorkerInit it was started with, `onMessage(h)` registers h for the messages post()
 * sends, `onExit(h)` (may be omitted) registers h to run as the worker exits. Node:
 * pool_node.ts; a browser: `new Worker(URL.createObjectURL(new Blob([source + prelude])))`,
 * posting init first.
 */
export interface WasmThreadHost {
  /** For logs: "node worker_threads", "web workers". */
  readonly name: string;
  /** The default thread count: logical cores (os.availableParallelism, hardwareConcurrency). */
  cores(): number;
  /** Starts one worker. Throws when it cannot (the pool then runs single-threaded). */
  start(init: WasmWorkerInit): WasmWorker;
  /**
   * Whether the main thread may block in Atomics.wait (Node: yes; a browser's main thread: no,
   * it spins on the barrier instead).
   */
  readonly mainCanWait: boolean;
}

/** The worker's source: kilnWasmWorker's definition (a host adds the call). */
export const WASM_WORKER_SOURCE = WASM_WORKER_CORE;

/** Test seams: hide shared memory (the single-thread fallback), inject a worker fault. */
export const wasmThreadsTesting: {
  hideSharedMemory: boolean;
  /** The next executable registered with the pool gets a broken instance in worker 0. */
  fault?: "throw" | "exit";
  /** Work (element operations) below which a step runs on the main thread alone. */
  minWork?: number;
} = { hideSharedMemory: false };

let hostOverride: WasmThreadHost | null | undefined;

/** Sets the host that starts workers (a browser build's Web Workers); null: none (1 thread). */
export function setWasmThreadHost(host: WasmThreadHost | null): void {
  hostOverride = host;
  shutdownWasmPool();
}

function host(): WasmThreadHost | undefined {
  if (hostOverride !== undefined) return hostOverride ?? undefined;
  return nodeThreadHost();
}

let sharedMemo: string | null | undefined;

/**
 * Why a shared WebAssembly.Memory cannot be made here (undefined: it can). An executable's
 * memory is shared exactly when it can, whatever the thread count, so one module serves every
 * count (the module imports a shared memory then: the flag is part of the cache key).
 */
export function sharedMemoryProblem(): string | undefined {
  if (wasmThreadsTesting.hideSharedMemory) return "SharedArrayBuffer is not available (hidden for a test)";
  if (sharedMemo === undefined) sharedMemo = probeShared() ?? null;
  return sharedMemo ?? undefined;
}

function probeShared(): string | undefined {
  if (typeof SharedArrayBuffer !== "function") {
    return "SharedArrayBuffer is not available (in a browser: the page is not cross-origin isolated)";
  }
  if (typeof Atomics !== "object" || typeof Atomics.wait !== "function") {
    return "Atomics.wait is not available";
  }
  try {
    const m = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    if (!(m.buffer instanceof SharedArrayBuffer)) return "a shared WebAssembly.Memory is not shared";
  } catch (e) {
    return `shared WebAssembly.Memory is not supported: ${(e as Error).message}`;
  }
  return undefined;
}

/** Why the wasm backend runs single-threaded whatever the thread count (undefined: it need not). */
export function wasmThreadsUnavailable(): string | undefined {
  const shared = sharedMemoryProblem();
  if (shared !== undefined) return shared;
  if (broken !== undefined) return broken;
  if (host() === undefined) return "no worker host (no node:worker_threads, and none set by setWasmThreadHost)";
  return undefined;
}

// ---- the thread count ------------------------------------------------------------------------

let override = 0;
let envMemo: number | null | undefined;

/** KILN_NUM_THREADS as native reads it: a positive integer (more than 512: 512), read once. */
function envThreads(): number | undefined {
  if (envMemo === undefined) {
    const v = (globalThis as { process?: { env?: Record<string, string | undefined> } })
      .process?.env?.["KILN_NUM_THREADS"];
    const n = v !== undefined && /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    envMemo = Number.isInteger(n) && n > 0 ? Math.min(n, MAX_WASM_THREADS) : null;
  }
  return envMemo ?? undefined;
}

/** The count asked for (setWasmThreads, else KILN_NUM_THREADS, else the host's cores). */
function askedThreads(): number {
  if (override > 0) return override;
  const env = envThreads();
  if (env !== undefined) return env;
  const h = host();
  const cores = h ? h.cores() : 1;
  return Math.max(1, Math.min(MAX_WASM_THREADS, Number.isInteger(cores) ? cores : 1));
}

let loggedSingle = false;

/** Threads the wasm backend runs on (the calling thread included): 1 where it cannot thread. */
export function wasmThreads(): number {
  const n = askedThreads();
  if (n <= 1) return 1;
  const why = wasmThreadsUnavailable();
  if (why !== undefined) {
    if (!loggedSingle) {
      loggedSingle = true;
      log("backend", `wasm: runs single-threaded: ${why}`);
    }
    return 1;
  }
  return n;
}

/** Sets the wasm thread count for the process; 0 restores the default (more than 512: 512). */
export function setWasmThreads(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`wasm threads must be an integer >= 0, got ${n}`);
  override = Math.min(n, MAX_WASM_THREADS);
}

/** Runs `fn` with the wasm backend at `n` threads, then restores the previous setting. */
export function withWasmThreads<T>(n: number, fn: () => T): T {
  if (!Number.isInteger(n) || n < 1) throw new Error(`wasm threads must be an integer >= 1, got ${n}`);
  const before = override;
  override = Math.min(n, MAX_WASM_THREADS);
  try {
    return fn();
  } finally {
    override = before;
  }
}

// ---- the pool --------------------------------------------------------------------------------

/** Why the pool failed last (then: single-threaded until setWasmThreadHost or a reset). */
let broken: string | undefined;

/** How long a worker may take to start a step (or to receive an executable) before it is an error. */
const PICKUP_MS = 30_000;
/** The main thread's wait slice (it checks the workers' health between slices). */
const SLICE_MS = 50;

/** An executable as the pool knows it: its module and shared memory, its functions by index. */
export interface ThreadedExecutable {
  readonly id: number;
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  /** The instance's functions, in WebAssembly.Module.exports order (the workers' order). */
  readonly fns: readonly ((...a: number[]) => void)[];
  /** The pool generation and worker count it was posted to. */
  posted: { gen: number; workers: number };
}

let nextExeId = 1;
const dropped = new FinalizationRegistry<number>((id) => {
  pool?.drop(id);
});

/** Makes an executable known to the pool (it is posted to workers at its first parallel step). */
export function threadedExecutable(module: WebAssembly.Module, memory: WebAssembly.Memory,
  exports: Record<string, unknown>): ThreadedExecutable {
  const fns = WebAssembly.Module.exports(module).filter((e) => e.kind === "function")
    .map((e) => exports[e.name] as (...a: number[]) => void);
  const t: ThreadedExecutable = { id: nextExeId++, module, memory, fns, posted: { gen: -1, workers: 0 } };
  dropped.register(t, t.id);
  return t;
}

/** The index of export `name` among the functions (what a step's call names). */
export function functionIndex(module: WebAssembly.Module, name: string): number {
  const i = WebAssembly.Module.exports(module).filter((e) => e.kind === "function")
    .findIndex((e) => e.name === name);
  if (i < 0) throw new Error(`wasm: the module exports no function '${name}'`);
  return i;
}

/** Steps run on the pool and executables posted to it in this process (for tests and logs). */
export const wasmPoolStats = { steps: 0, posted: 0, workers: 0 };

class Pool {
  readonly ctl = new Int32Array(new SharedArrayBuffer(CTL_INTS * 4));
  readonly text = new Uint8Array(new SharedArrayBuffer(TEXT_BYTES));
  readonly workers: WasmWorker[] = [];
  private readonly drops: number[] = [];
  readonly gen = ++poolGen;
  private building = false;
  private nt = 0;
  /** Parts of the step being built. */
  private np = 0;

  constructor(readonly host: WasmThreadHost, readonly spinUs: number) {}

  drop(id: number): void {
    this.drops.push(id);
  }

  /** Starts workers until there are `n`. */
  grow(n: number): void {
    while (this.workers.length < n) {
      const index = this.workers.length;
      this.workers.push(this.host.start({
        ctl: this.ctl.buffer as SharedArrayBuffer,
        text: this.text.buffer as SharedArrayBuffer,
        index,
        spinUs: this.spinUs,
        seq: Atomics.load(this.ctl, CTL.SEQ),
      }));
      wasmPoolStats.workers++;
    }
  }

  /** Posts `exe` to the workers that lack it and waits until each has instantiated it. */
  register(exe: ThreadedExecutable, workers: number): void {
    if (exe.posted.gen === this.gen && exe.posted.workers >= workers) return;
    const from = exe.posted.gen === this.gen ? exe.posted.workers : 0;
    const fault = wasmThreadsTesting.fault;
    wasmThreadsTesting.fault = undefined;
    for (let w = from; w < workers; w++) {
      for (const d of this.drops) this.workers[w]!.post({ drop: d });
      if (fault !== undefined && w === 0) this.workers[w]!.post({ exe: exe.id, fault });
      else this.workers[w]!.post({ exe: exe.id, module: exe.module, memory: exe.memory });
    }
    if (from === 0) this.drops.length = 0;
    const c = this.ctl;
    Atomics.store(c, CTL.ERR, 0);
    c[CTL.CMD] = CMD_MAIL;
    c[CTL.EXE] = exe.id;
    c[CTL.NT] = workers + 1;
    Atomics.store(c, CTL.PENDING, workers);
    Atomics.add(c, CTL.SEQ, 1);
    Atomics.notify(c, CTL.SEQ);
    this.finish(workers + 1, "receive an executable");
    exe.posted = { gen: this.gen, workers };
    wasmPoolStats.posted++;
  }

  /** Starts building a step on `nt` threads (the main thread is thread 0). */
  begin(nt: number): void {
    this.building = true;
    this.nt = nt;
    this.np = 0;
  }

  /**
   * Adds a call to part `part`'s row (parts are taken by whichever thread is free, in order);
   * false when it does not fit.
   */
  call(part: number, fn: number, args: ArrayLike<number>): boolean {
    if (!Number.isInteger(part) || part < 0 || part >= MAX_WASM_PARTS) return false;
    const c = this.ctl;
    while (this.np <= part) c[CTL.ROWS + this.np++ * CTL.ROW_INTS] = 0;
    const row = CTL.ROWS + part * CTL.ROW_INTS;
    let at = row + 1;
    for (let k = 0; k < c[row]!; k++) at += 2 + c[at + 1]!;
    if (at + 2 + args.length > row + CTL.ROW_INTS) return false;
    c[at] = fn;
    c[at + 1] = args.length;
    for (let j = 0; j < args.length; j++) c[at + 2 + j] = args[j]!;
    c[row]!++;
    return true;
  }

  /**
   * Runs the step built since begin() over `exe`: `extra` here first, then every thread takes
   * parts (an atomic counter) until none is left, and this one waits for the workers.
   */
  run(exe: ThreadedExecutable, extra?: () => void): void {
    if (!this.building) throw new Error("wasm threads: run() without begin()");
    this.building = false;
    const nt = this.nt;
    const c = this.ctl;
    Atomics.store(c, CTL.ERR, 0);
    c[CTL.CMD] = CMD_CALL;
    c[CTL.EXE] = exe.id;
    c[CTL.NT] = nt;
    c[CTL.NPARTS] = this.np;
    Atomics.store(c, CTL.NEXT, 0);
    Atomics.store(c, CTL.PENDING, nt - 1);
    Atomics.add(c, CTL.SEQ, 1);
    if (Atomics.load(c, CTL.SLEEPERS) > 0) Atomics.notify(c, CTL.SEQ);
    let own: unknown;
    try {
      // The work only this thread can do first, then parts as the workers do.
      extra?.();
      for (;;) {
        const p = Atomics.add(c, CTL.NEXT, 1);
        if (p >= this.np) break;
        let at = CTL.ROWS + p * CTL.ROW_INTS;
        const n = c[at++]!;
        for (let k = 0; k < n; k++) {
          const fn = exe.fns[c[at++]!]!;
          const nargs = c[at++]!;
          const args = new Array<number>(nargs);
          for (let j = 0; j < nargs; j++) args[j] = c[at++]!;
          fn(...args);
        }
      }
    } catch (e) {
      own = e;
      Atomics.store(c, CTL.NEXT, this.np); // the workers take no more parts
    }
    this.finish(nt, "run a step");
    wasmPoolStats.steps++;
    if (own !== undefined) throw own;
  }

  /** Waits until every worker of the step is done; throws (and retires the pool) on a failure. */
  private finish(nt: number, what: string): void {
    const c = this.ctl;
    const seq = c[CTL.SEQ]!;
    const t0 = Date.now();
    let spins = 0;
    for (;;) {
      const v = Atomics.load(c, CTL.PENDING);
      if (v === 0) break;
      if (spins < 2000) {
        spins++;
        continue;
      }
      if (this.host.mainCanWait) {
        Atomics.store(c, CTL.MAIN_SLEEPING, 1);
        Atomics.wait(c, CTL.PENDING, v, SLICE_MS);
        Atomics.store(c, CTL.MAIN_SLEEPING, 0);
      }
      const why = this.health(nt, seq, Date.now() - t0, what);
      if (why !== undefined) this.fail(why);
    }
    const err = Atomics.load(c, CTL.ERR);
    if (err !== 0) {
      const n = new DataView(this.text.buffer).getInt32(0, true);
      const bytes = new Uint8Array(n);
      bytes.set(this.text.subarray(4, 4 + n));
      this.fail(`worker thread ${err} failed: ${new TextDecoder().decode(bytes)}`);
    }
  }

  private health(nt: number, seq: number, ms: number, what: string): string | undefined {
    const c = this.ctl;
    for (let w = 0; w + 1 < nt; w++) {
      if (Atomics.load(c, CTL.STATE + w) === 3) return `worker thread ${w + 1} exited`;
      if (ms > PICKUP_MS && Atomics.load(c, CTL.SEEN + w) !== seq) {
        return `worker thread ${w + 1} did not ${what} within ${PICKUP_MS / 1000} s`;
      }
    }
    return undefined;
  }

  private fail(why: string): never {
    const msg = `wasm threads: ${why}; the backend runs single-threaded from now on`;
    broken = why;
    log("backend", `wasm: ${msg}`);
    this.stop();
    throw new Error(msg);
  }

  stop(): void {
    if (pool === this) pool = undefined;
    const c = this.ctl;
    c[CTL.CMD] = CMD_STOP;
    c[CTL.NT] = this.workers.length + 1;
    Atomics.add(c, CTL.SEQ, 1);
    Atomics.notify(c, CTL.SEQ);
    for (const w of this.workers) {
      try {
        w.terminate();
      } catch {
        // already gone
      }
    }
  }
}

let poolGen = 0;
let pool: Pool | undefined;

/** KILN_POOL_SPIN_US as native reads it (default 100, at most 1,000,000). */
function spinUs(): number {
  const v = (globalThis as { process?: { env?: Record<string, string | undefined> } })
    .process?.env?.["KILN_POOL_SPIN_US"];
  const n = v !== undefined && /^\s*\d+\s*$/.test(v) ? Number(v) : 100;
  return Math.min(n, 1_000_000);
}

/**
 * The pool with at least `threads - 1` workers, `exe` registered with them; undefined (and a
 * log line) where threads cannot run. Throws when a worker fails while receiving it.
 */
export function poolFor(exe: ThreadedExecutable, threads: number): Pool | undefined {
  if (wasmThreadsUnavailable() !== undefined) return undefined;
  const h = host()!;
  if (!pool) {
    pool = new Pool(h, spinUs());
    log("backend", `wasm: a pool of ${h.name} (${threads} threads)`);
  }
  try {
    pool.grow(threads - 1);
  } catch (e) {
    broken = `workers could not start: ${(e as Error).message}`;
    log("backend", `wasm: runs single-threaded: ${broken}`);
    pool.stop();
    return undefined;
  }
  pool.register(exe, threads - 1);
  return pool;
}

export type { Pool as WasmPool };

/** Ends the pool's workers (a later parallel step starts a new pool) and forgets a failure. */
export function shutdownWasmPool(): void {
  pool?.stop();
  pool = undefined;
  broken = undefined;
}

/** Work (element operations) from which a step is split across threads. */
export function parallelMinWork(): number {
  return wasmThreadsTesting.minWork ?? PARALLEL_MIN_WORK;
}

/** Measured (docs/runtime.md §7): below this a step on 2 threads is not faster than on 1. */
const PARALLEL_MIN_WORK = 32768;
