// The browser build's compiler/analyze_host.ts: the analysis runs in the calling thread. A
// worker cannot be asked synchronously there (the main thread of a page may not Atomics.wait),
// and compile() is synchronous.

import { analyseSource, type Analysed, type AnalysisRequest } from "./analyze_core.ts";
import { log } from "../util/log.ts";

let started = false;

/** The analysis of `req`, in this thread. */
export function analyseRequest(req: AnalysisRequest): Analysed {
  if (!started) {
    started = true;
    log("analysis", `source analysis runs in this thread: ${INLINE_REASON}`);
  }
  return analyseSource(req);
}

const INLINE_REASON = "the browser build has no worker threads it could wait on";

/** Where analyses run: always inline here. */
export function analysisHost(): string {
  return started ? `inline: ${INLINE_REASON}` : "not started";
}
