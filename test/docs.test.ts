// The documentation is true:
//   - docs/ops.md (the op coverage table) is rebuilt from the op registry and the fixture files
//     and compared with the committed file;
//   - every TypeScript block of README.md and docs/*.md runs, as a user would run it: in a
//     project with the packed Kiln installed (packed.ts), type-checked by strict `tsc`, then
//     executed (with tsx, as the pages' `npx tsx` does); a JavaScript block (```js) runs on
//     plain `node`. A block that is not a whole program (a signature, an interface, a snippet
//     continuing the page's example) is marked ```ts fragment and only its fence is checked.
//     A program's expected output is the plain block right after it that starts with
//     `$ npx tsx <name>.ts` (the program is saved under that name, as the page says); its
//     remaining lines are compared with what the run prints (stdout and stderr interleaved).

import { spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { opsDoc } from "../scripts/gen_ops_doc.ts";
import { packedProject, REPO } from "./packed.ts";

it("docs/ops.md is current (run: npx tsx scripts/gen_ops_doc.ts)", () => {
  const committed = readFileSync(join(REPO, "docs", "ops.md"), "utf8");
  expect(committed).toBe(opsDoc());
});

it("every registered op has a row in an area table", () => {
  expect(opsDoc()).not.toMatch(/\| — \|/);
});

interface Block {
  /** `README.md:42`: the page and the fence's line. */
  readonly where: string;
  readonly info: string;
  readonly code: string;
  /** The file name the page runs it as (from its output block), else a generated one. */
  readonly file: string;
  /** The output the page shows, or undefined when it shows none. */
  readonly expected: string | undefined;
}

const PAGES = ["README.md", ...readdirSync(join(REPO, "docs"))
  .filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];

function blocks(page: string): Block[] {
  const lines = readFileSync(join(REPO, page), "utf8").split("\n");
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)(.*)$/.exec(lines[i]!);
    if (!open) continue;
    let j = i + 1;
    while (j < lines.length && !lines[j]!.startsWith("```")) j++;
    const lang = open[1]!;
    if (["ts", "typescript", "js", "javascript"].includes(lang)) {
      const code = lines.slice(i + 1, j).join("\n");
      let k = j + 1;
      while (k < lines.length && lines[k]!.trim() === "") k++;
      const ext = lang.startsWith("j") ? "mjs" : "ts";
      let file = `${page.replace(/\W/g, "_")}_${i + 1}.${ext}`;
      let expected: string | undefined;
      const run = k + 1 < lines.length && lines[k] === "```"
        ? /^\$ npx tsx (\S+\.ts)$/.exec(lines[k + 1]!) : null;
      if (run) {
        file = run[1]!;
        let e = k + 2;
        while (e < lines.length && !lines[e]!.startsWith("```")) e++;
        expected = lines.slice(k + 2, e).join("\n");
      }
      out.push({ where: `${page}:${i + 1}`, info: `${lang}${open[2]}`.trim(), code, file,
        expected });
    }
    i = j;
  }
  return out;
}

const ALL = PAGES.flatMap(blocks);
const PROGRAMS = ALL.filter((b) => !/\bfragment\b/.test(b.info));

describe("documentation blocks", () => {
  it("are programs (```ts) or marked fragments (```ts fragment)", () => {
    const kinds = /^(ts|typescript|js|javascript)( fragment)?$/;
    const unknown = ALL.filter((b) => !kinds.test(b.info));
    expect(unknown.map((b) => `${b.where}: ${b.info}`)).toEqual([]);
    // A program imports what it uses; a block without imports is a fragment of a page.
    const bare = PROGRAMS.filter((b) => !/^import /m.test(b.code));
    expect(bare.map((b) => b.where)).toEqual([]);
  });
});

describe("documentation programs run against the packed package", () => {
  let project = "";
  const dirs = new Map<Block, string>();
  const fragmentDirs = new Map<string, Block>();

  beforeAll(() => {
    project = packedProject();
    const root = join(project, "docs-run");
    mkdirSync(root, { recursive: true });
    PROGRAMS.forEach((b, n) => {
      const dir = join(root, `${n}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, b.file), `${b.code}\n`);
      dirs.set(b, dir);
    });
    // A fragment is not run, but what it imports must exist where it says.
    ALL.filter((b) => !PROGRAMS.includes(b)).forEach((b, n) => {
      const imports = b.code.match(/^import [\s\S]*? from "[^"]+";$/gm) ?? [];
      if (imports.length === 0) return;
      mkdirSync(join(root, `f${n}`), { recursive: true });
      writeFileSync(join(root, `f${n}`, "imports.ts"), `${imports.join("\n")}\nexport {};\n`);
      fragmentDirs.set(`f${n}`, b);
    });
    writeFileSync(join(root, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        types: ["node"],
        skipLibCheck: true,
      },
      include: ["*/*.ts"],
    }));
  }, 15 * 60_000);

  it("type-check under strict tsc", () => {
    const tsc = join(project, "node_modules", "typescript", "bin", "tsc");
    const r = spawnSync(process.execPath, [tsc, "-p", join(project, "docs-run")], {
      encoding: "utf8",
    });
    // Name each error by the page and line of the block it comes from.
    const report = (r.stdout + r.stderr).replace(/^(f?\d+)\/(\S+?)\((\d+),\d+\)/gm,
      (_, n: string, _f: string, line: string) => {
        const b = n.startsWith("f") ? fragmentDirs.get(n)! : PROGRAMS[Number(n)]!;
        return n.startsWith("f") ? `${b.where} (its imports)` : `${b.where}+${line}`;
      });
    expect(report).toBe("");
  }, 300_000);

  // Two at a time: each is a node process loading Kiln; the suite shares two cores.
  it("run and print what the pages show", async () => {
    const results = new Map<Block, { status: number | null; printed: string }>();
    const queue = [...PROGRAMS];
    const worker = async (): Promise<void> => {
      for (let b = queue.shift(); b; b = queue.shift()) {
        const block = b;
        const dir = dirs.get(block)!;
        // stdout and stderr into one file, so the two interleave exactly as on a terminal.
        const log = join(dir, "output.txt");
        const fd = openSync(log, "w");
        const status = await new Promise<number | null>((done) => {
          const ts = block.file.endsWith(".ts");
          const args = ts ? ["--import", "tsx", block.file] : [block.file];
          const child = spawn(process.execPath, args, { cwd: dir, stdio: ["ignore", fd, fd] });
          child.on("close", (code) => done(code));
        });
        closeSync(fd);
        // The pages run each program from the directory it is in: paths print relative to it.
        const printed = readFileSync(log, "utf8").replaceAll(`${dir}/`, "");
        results.set(block, { status, printed });
      }
    };
    await Promise.all([worker(), worker()]);
    const problems: string[] = [];
    for (const b of PROGRAMS) {
      const r = results.get(b)!;
      const printed = r.printed.replace(/[ \t]+$/gm, "").trimEnd();
      if (r.status !== 0) {
        problems.push(`${b.where} exited ${r.status}:\n${printed}`);
      } else if (b.expected !== undefined && printed !== b.expected.replace(/[ \t]+$/gm, "")
        .trimEnd()) {
        problems.push(`${b.where} printed:\n${printed}\n--- the page shows:\n${b.expected}`);
      }
    }
    expect(problems.join("\n\n")).toBe("");
  }, 600_000);
});
