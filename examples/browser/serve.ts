// A tiny static server for the example page (node:http, nothing else): examples/browser/ at /,
// the browser bundle (dist/browser/kiln.js and its map) as /kiln.js, on 127.0.0.1. With
// --isolate it sends the two headers that make the page cross-origin isolated
// (`crossOriginIsolated`, which SharedArrayBuffer and wasm threads need):
//   Cross-Origin-Opener-Policy: same-origin
//   Cross-Origin-Embedder-Policy: require-corp
// Missing pieces are made first: the bundle (npm run build:browser) and the weights
// (make_weights.ts).
//
//   npx tsx examples/browser/serve.ts [--isolate] [--port 8080]

import { existsSync, readFileSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize, sep } from "node:path";

const HERE = import.meta.dirname;
const ROOT = join(HERE, "../..");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".safetensors": "application/octet-stream",
};

export interface ServeOptions {
  /** Send COOP/COEP so the page is cross-origin isolated. */
  isolate: boolean;
  /** 0 (default): any free port. */
  port?: number;
  /** The folder holding kiln.js (default dist/browser). */
  bundleDir?: string;
  /** The folder holding the page and its weights (default this one). */
  pageDir?: string;
}

export interface Served {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Serves the page; resolves once listening. */
export function serve(options: ServeOptions): Promise<Served> {
  const bundleDir = options.bundleDir ?? join(ROOT, "dist/browser");
  const pageDir = options.pageDir ?? HERE;
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    const name = path === "/" ? "index.html" : path.slice(1);
    const base = name === "kiln.js" || name === "kiln.js.map" ? bundleDir : pageDir;
    const file = normalize(join(base, name));
    const headers: Record<string, string> = { "Cache-Control": "no-store" };
    if (options.isolate) {
      headers["Cross-Origin-Opener-Policy"] = "same-origin";
      headers["Cross-Origin-Embedder-Policy"] = "require-corp";
    }
    const ok = (req.method === "GET" || req.method === "HEAD") &&
      file.startsWith(normalize(base) + sep) && TYPES[extname(file)] !== undefined &&
      existsSync(file) && statSync(file).isFile();
    if (!ok) {
      res.writeHead(404, { ...headers, "Content-Type": "text/plain" });
      res.end(`not found: ${path}\n`);
      return;
    }
    res.writeHead(200, { ...headers, "Content-Type": TYPES[extname(file)]! });
    res.end(req.method === "HEAD" ? undefined : readFileSync(file));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/`,
        server,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--port");
  const port = at >= 0 ? Number(args[at + 1]) : 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be 0..65535, got ${args[at + 1]}`);
  }
  for (const a of args) {
    if (a.startsWith("--") && a !== "--isolate" && a !== "--port") {
      throw new Error(`unknown option ${a} (serve.ts [--isolate] [--port N])`);
    }
  }
  if (!existsSync(join(ROOT, "dist/browser/kiln.js"))) {
    const { buildBrowser } = await import("../../scripts/build_browser.ts");
    console.log(`built ${(await buildBrowser()).file}`);
  }
  if (!existsSync(join(HERE, "gpt2-tiny.safetensors"))) {
    const { makeWeights } = await import("./make_weights.ts");
    console.log(`wrote ${makeWeights()}`);
  }
  const s = await serve({ isolate: args.includes("--isolate"), port });
  console.log(`${s.url} (${args.includes("--isolate") ? "cross-origin isolated" : "not isolated"})`);
}
