// The Node host of the wasm backend's threads (threads.ts, WasmThreadHost): worker_threads
// workers running the worker source (worker_source.ts) from a string (`eval: true`: the same
// text from the TypeScript sources, where Node 20 gives a worker no .ts loader, and from
// dist/), unref'd so they never keep the process alive. This is the one file that reaches
// node:worker_threads, through compiler/node_builtins.ts at the first use (never at import),
// so a browser build loads it harmlessly and supplies its own host.

import { nodeModule } from "../../compiler/node_builtins.ts";
import type { WasmThreadHost, WasmWorker, WasmWorkerInit } from "./threads.ts";
import { WASM_WORKER_CORE } from "./worker_source.ts";

const PRELUDE = `
const { parentPort, workerData } = require("node:worker_threads");
kilnWasmWorker(workerData, (h) => parentPort.on("message", h), (h) => process.on("exit", h));
`;

let memo: WasmThreadHost | null | undefined;

/** The Node host, or undefined where there is no node:worker_threads. */
export function nodeThreadHost(): WasmThreadHost | undefined {
  if (memo === undefined) memo = make() ?? null;
  return memo ?? undefined;
}

function make(): WasmThreadHost | undefined {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  if (proc?.versions?.node === undefined) return undefined;
  const wt = nodeModule("node:worker_threads");
  if (!wt) return undefined;
  const os = nodeModule("node:os");
  const source = WASM_WORKER_CORE + PRELUDE;
  return {
    name: "node worker_threads",
    mainCanWait: true,
    cores: () => os?.availableParallelism?.() ?? os?.cpus().length ?? 1,
    start(init: WasmWorkerInit): WasmWorker {
      const w = new wt.Worker(source, { eval: true, workerData: init });
      // An 'error' listener keeps an error in the worker from being thrown in this thread
      // (the worker marks itself dead in the control block as it exits; threads.ts reads
      // that). No 'message' listener: it would keep the process alive.
      w.on("error", () => {});
      w.unref();
      return {
        post: (m) => w.postMessage(m),
        terminate: () => void w.terminate(),
      };
    },
  };
}
