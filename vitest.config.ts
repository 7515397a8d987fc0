import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// Tests never write into the user's program cache (~/.cache/kiln): every run gets its own
// temporary cache directory, so no state carries over between runs.
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-test-cache-"));

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    env: { KILN_CACHE_DIR: cacheDir },
  },
});
