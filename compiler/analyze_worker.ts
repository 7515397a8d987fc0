// The analysis worker's entry (compiler/analyze_host.ts starts it): answers each request on
// its port with analyze_core's result, and bumps the shared flag after every message, since
// the parent is blocked in `Atomics.wait` until it does.

import { workerData } from "node:worker_threads";
import { analyseSource, type AnalysisRequest } from "./analyze_core.ts";

const { port, flag } = workerData as {
  port: import("node:worker_threads").MessagePort;
  flag: Int32Array;
};

function send(m: unknown): void {
  port.postMessage(m);
  Atomics.add(flag, 0, 1);
  Atomics.notify(flag, 0);
}

const text = (e: unknown): string => String((e as Error | undefined)?.stack ?? e);

// An error nothing else catches still answers: the parent is waiting for one.
process.on("uncaughtException", (e) => send({ error: text(e) }));

port.on("message", (req: AnalysisRequest) => {
  let out: unknown;
  try {
    out = { value: analyseSource(req) };
  } catch (e) {
    out = { error: text(e) };
  }
  send(out);
});
