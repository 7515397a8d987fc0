// The example page (examples/browser/) in headless Chromium (Debian's package, driven by
// playwright-core, as test/cli/html.test.ts does): the browser bundle built fresh, GPT-2 tiny
// weights written by make_weights.ts, both served by examples/browser/serve.ts on localhost.
// Served with COOP/COEP the page is cross-origin isolated; without them it is not and has no
// SharedArrayBuffer. Either way it generates exactly the tokens the Node library computes from
// the same file and prompt, in graph mode on wasm with two compiles (the prompt's program and
// one step's) and the recompile reason between them, with no console error. The wasm backend
// has no worker pool yet, so the page reports 1 thread in both runs. Only this needs Chromium;
// CI installs it (.ci/run), and without it the test is skipped with the reason in its name.

import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSafetensors, noGrad, readSafetensors, tensor } from "../../index.ts";
import { GPT2 } from "../../models/gpt2.ts";
import { makeWeights } from "../../examples/browser/make_weights.ts";
import { serve } from "../../examples/browser/serve.ts";
import { buildBrowser } from "../../scripts/build_browser.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = existsSync(CHROMIUM);
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/** The page's default prompt and number of new tokens (examples/browser/main.js). */
const PROMPT = [5, 17, 42, 8];
const NEW_TOKENS = 16;

interface PageResult {
  tokens: number[];
  mode: string;
  calls: number;
  compiles: number;
  cacheHits: number;
  recompiles: { call: number; reason: string }[];
  replayReasons: string[];
  backend: string;
  firstStepMs: number;
  msPerToken: number;
  threads: number;
  crossOriginIsolated: boolean;
  sharedArrayBuffer: boolean;
}

/** What the Node library generates from the same weights file and prompt. */
function nodeTokens(weights: string): number[] {
  const bytes = new Uint8Array(readFileSync(weights));
  const config = JSON.parse(readSafetensors(bytes).metadata!["kiln.config"]!);
  const model = new GPT2(config).eval();
  model.loadStateDict(loadSafetensors(bytes));
  const ids = noGrad(() => model.generate(tensor([PROMPT.map(BigInt)]), {
    maxNewTokens: NEW_TOKENS, staticCache: true,
  }));
  return (ids.toArray() as number[][])[0]!.map(Number);
}

describe.skipIf(!haveChromium)(
  `the example page in Chromium (skipped when ${CHROMIUM} is missing: apt-get install chromium)`,
  () => {
    let dir: string;
    let bundleDir: string;
    let pageDir: string;
    let browser: Browser;
    let want: number[];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "kiln-browser-page-"));
      bundleDir = (await buildBrowser(join(dir, "dist"))).file.replace(/\/kiln\.js$/, "");
      // The page's own files, and the weights written beside a copy of them.
      pageDir = join(dir, "page");
      cpSync(join(import.meta.dirname, "../../examples/browser"), pageDir, {
        recursive: true,
        filter: (src) => !src.endsWith(".safetensors"),
      });
      want = nodeTokens(makeWeights(join(pageDir, "gpt2-tiny.safetensors")));
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    async function runPage(isolate: boolean): Promise<{ r: PageResult; errors: string[] }> {
      const served = await serve({ isolate, bundleDir, pageDir });
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error") errors.push(m.text());
      });
      page.on("pageerror", (e) => errors.push(String(e)));
      try {
        await page.goto(served.url);
        await page.waitForFunction(
          "window.kilnResult !== undefined || window.kilnError !== undefined",
          undefined,
          { timeout: 60_000 },
        );
        const error = (await page.evaluate("window.kilnError ?? null")) as string | null;
        if (error !== null) throw new Error(`the page failed: ${error}`);
        const r = (await page.evaluate("window.kilnResult")) as PageResult;
        // What the page shows is what it computed.
        const shown = await page.textContent("#tokens");
        expect(shown).toContain(`generated ${r.tokens.slice(PROMPT.length).join(" ")}`);
        expect(await page.textContent("#recompiles")).toContain(r.recompiles[0]?.reason ?? "?");
        return { r, errors };
      } finally {
        await page.close();
        await served.close();
      }
    }

    function expectGenerated(r: PageResult): void {
      expect(new Set(want.slice(PROMPT.length)).size).toBeGreaterThan(3);
      expect(r.tokens).toEqual(want);
      expect(r).toMatchObject({
        mode: "graph", backend: "wasm", calls: NEW_TOKENS, compiles: 2, cacheHits: NEW_TOKENS - 2,
        replayReasons: [],
      });
      expect(r.recompiles).toEqual([{
        call: 2,
        reason: "inputIds.shape[1] was 4, now 1: dim 1 of inputIds is now dynamic (size 1 is " +
          "specialized (sizes 0 and 1 always are))",
      }]);
      expect(r.firstStepMs).toBeGreaterThan(0);
      expect(r.msPerToken).toBeGreaterThan(0);
    }

    it("with COOP/COEP: cross-origin isolated, Node's tokens, compiles and reasons shown", async () => {
      const { r, errors } = await runPage(true);
      expect(errors).toEqual([]);
      expect(r.crossOriginIsolated).toBe(true);
      expect(r.sharedArrayBuffer).toBe(true);
      expectGenerated(r);
      expect(r.threads).toBe(1);
    }, 90_000);

    it("without the headers: not isolated, no SharedArrayBuffer, the same tokens on one thread", async () => {
      const { r, errors } = await runPage(false);
      expect(errors).toEqual([]);
      expect(r.crossOriginIsolated).toBe(false);
      expect(r.sharedArrayBuffer).toBe(false);
      expectGenerated(r);
      expect(r.threads).toBe(1);
    }, 90_000);
  },
);
