// The browser build trusts Kiln's own classes (compiler/library_code.ts): read from their
// bundled text, their module-level names are taken to be the library's imports and constants,
// which need no guard. This checks that claim where it can be checked — in Node, where the
// analysis reads each method's ORIGINAL file and resolves every name — for exactly the methods
// the browser entry marks: none may have a free variable compile() would guard.

import { expect, it } from "vitest";
import { nn } from "../../index.ts";
import { analyzeFunction } from "../../compiler/analyze.ts";
import { libraryFunctions, UNCHECKED_METHODS } from "../../compiler/library_code.ts";
import * as models from "../../models/index.ts";

it("every method the browser build trusts has no free variable to guard (Node's analysis)", () => {
  // The same namespaces index.browser.ts hands markLibraryCode.
  const namespaces = [nn, ...Object.values(models).filter((m) => typeof m === "object")];
  const fns = libraryFunctions(nn.Module, namespaces);
  expect(fns.length).toBeGreaterThan(80);
  const names = new Set(fns.map((f) => f.name));
  for (const n of ["forward", "generate", "createStaticCache", "forwardStatic"]) {
    expect(names, n).toContain(n);
  }
  // The methods left out are exactly those the Node analysis cannot check.
  const all = libraryFunctions(nn.Module, namespaces, { unchecked: true });
  const unchecked = all.filter((f) => !fns.includes(f));
  expect(unchecked.map((f) => analyzeFunction(f).source)).toEqual(UNCHECKED_METHODS.map(() => "toString"));
  const problems: string[] = [];
  for (const fn of fns) {
    const a = analyzeFunction(fn);
    if (a.source !== "file") {
      problems.push(`${fn.name}: analysed from ${a.source} (${a.note ?? ""})`);
      continue;
    }
    for (const v of a.freeVariables) {
      if (!v.guard || v.binding === "import" || v.binding === "function" || v.binding === "class") {
        continue;
      }
      problems.push(`${fn.name} (${a.file}:${a.line}): reads ${v.name} (${v.binding})`);
    }
  }
  expect(problems).toEqual([]);
}, 300_000);
