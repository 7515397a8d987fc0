import { mkdtempSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// Tests never write into the user's program cache (~/.cache/kiln): every run gets its own
// temporary cache directory, so no state carries over between runs.
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-test-cache-"));

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    // Vitest's default is one worker less than the cores: one worker on a 2-core CI machine,
    // which left a core idle whenever a test file was not compiling C. Two files at a time
    // keep both busy (native tests share the run's cache directory and compile in parallel).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // Native results start as 0xFF bytes, so an element a program leaves unwritten shows
    // (test/runtime/native_results.test.ts).
    env: { KILN_CACHE_DIR: cacheDir, KILN_NATIVE_UNINIT_MIN: "0", KILN_NATIVE_POISON_RESULTS: "1" },
  },
});
