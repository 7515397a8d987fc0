// Building a test file's native kernels in one batch: the cases run once on `js` (which the
// file does anyway) while the eager modules they compile are collected, then `prepareNative`
// builds every kernel those modules need on `native` in parallel compiler runs of up to 48
// kernels each, so the native pass finds them loaded instead of running the C compiler once per
// op (~0.45 s each on a 2-core machine). js and native optimize an eager module alike, so the
// collected modules are the ones native compiles.

import type { Module } from "../../ir/module.ts";
import { backendNames } from "../../runtime/index.ts";
import { prepareNative } from "../../runtime/native/backend.ts";
import { setEagerBackend, setEagerModuleObserver } from "../../tensor/dispatch.ts";

/** Runs `cases` on js collecting their eager modules, then builds their native kernels. */
export function warmNative(cases: () => void): void {
  if (!backendNames().includes("native")) return;
  const modules: Module[] = [];
  const saved = setEagerModuleObserver((m) => modules.push(m));
  setEagerBackend("js");
  try {
    cases();
  } finally {
    setEagerModuleObserver(saved);
    setEagerBackend(undefined);
  }
  prepareNative(modules);
}

/** Runs one case for its modules only: a case that is meant to fail fails in its own test. */
export function tryCase(run: () => unknown): void {
  try {
    run();
  } catch {
    // its test checks the error
  }
}
