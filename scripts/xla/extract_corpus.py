#!/usr/bin/env python3
"""Extracts the HLO module texts of an XLA source tree into one JSON-lines corpus.

Usage: extract_corpus.py <xla source dir> [<out.jsonl>]   (default out: stdout)

Kiln does not ship XLA's test text; anyone with an XLA checkout (or a few of its test files)
regenerates the corpus that scripts/xla/measure_dialect.ts reads:

- every C++ raw string literal R"delim( ... )delim" in a .cc or .h file whose text holds an HLO
  module: a `HloModule` header or an `ENTRY` computation;
- every .hlo file, whole (XLA's parser skips the `// RUN:` and `// CHECK` comment lines).

Raw strings that are format templates (`%s`, `%d`, `$name` placeholders filled in by
absl::StrFormat / StrReplaceAll before parsing) are left out and counted, since their text is
not HLO until a test fills it in. Identical texts are kept once (the first source wins).

Each output line is {"id", "source", "index", "text"}: `source` is the path relative to the
given directory, `index` the module's position in that file, `id` is "source#index".
"""
import json
import os
import re
import sys

RAW_OPEN = re.compile(r'R"([^()\\\s]{0,16})\(')
# A placeholder: `%s` / `%d` not followed by a name character (an HLO name like `%sum` is not
# one), a positional `%1$s`, or a `$name` / `${name}` / `{{NAME}}` substitution.
TEMPLATE = re.compile(r"%[sdi](?![\w.\-])|%\d+\$|\$[A-Za-z_][A-Za-z0-9_]*|\$\{|\{\{[A-Z_]+\}\}")


def raw_strings(src):
    """The bodies of the C++ raw string literals in `src`, in order."""
    pos = 0
    while True:
        m = RAW_OPEN.search(src, pos)
        if m is None:
            return
        close = ")" + m.group(1) + '"'
        end = src.find(close, m.end())
        if end < 0:
            return
        yield src[m.end():end]
        pos = end + len(close)


def holds_module(text):
    return re.search(r"^\s*HloModule\b", text, re.M) is not None or re.search(
        r"^\s*ENTRY\b", text, re.M) is not None


def extract(root):
    """(modules, counts): modules as dicts, counts of what was seen and skipped."""
    seen = set()
    modules = []
    counts = {"files": 0, "raw_strings": 0, "templates": 0, "duplicates": 0, "hlo_files": 0}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if name.endswith(".hlo"):
                texts = [open(path, encoding="utf-8", errors="replace").read()]
                counts["hlo_files"] += 1
            elif name.endswith((".cc", ".h")):
                src = open(path, encoding="utf-8", errors="replace").read()
                texts = []
                for body in raw_strings(src):
                    if not holds_module(body):
                        continue
                    counts["raw_strings"] += 1
                    if TEMPLATE.search(body):
                        counts["templates"] += 1
                        continue
                    texts.append(body)
            else:
                continue
            counts["files"] += 1
            for i, text in enumerate(texts):
                key = text.strip()
                if key in seen:
                    counts["duplicates"] += 1
                    continue
                seen.add(key)
                modules.append({"id": f"{rel}#{i}", "source": rel, "index": i, "text": text})
    return modules, counts


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    modules, counts = extract(sys.argv[1])
    out = open(sys.argv[2], "w", encoding="utf-8") if len(sys.argv) > 2 else sys.stdout
    for m in modules:
        out.write(json.dumps(m) + "\n")
    if out is not sys.stdout:
        out.close()
    print(
        f"{len(modules)} modules from {counts['files']} files "
        f"({counts['hlo_files']} .hlo files; {counts['raw_strings']} raw strings with a module, "
        f"{counts['templates']} of them templates left out; {counts['duplicates']} duplicates)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
