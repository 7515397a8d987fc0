#!/usr/bin/env python3
"""Which modules of a corpus (scripts/xla/extract_corpus.py's JSON lines) a real XLA accepts.

Usage: xla_accepts.py <corpus.jsonl>
Prints one JSON object per module: {"id", "parsed": bool, "verified": bool, "error"?: str}.
"parsed" is XLA's text parser (jaxlib's hlo_module_from_text); "verified" is XLA's proto loader
with its verifier (HloModule::CreateFromProto through hlo_to_stablehlo) on the module XLA parsed.
scripts/xla/measure_dialect.ts --xla runs it; jaxlib is a development-time tool here, never a
dependency of Kiln.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from jaxlib import _hlo, _jax  # noqa: E402


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else type(e).__name__


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            m = json.loads(line)
            out = {"id": m["id"], "parsed": False, "verified": False}
            try:
                module = _hlo.hlo_module_from_text(m["text"])
                out["parsed"] = True
                _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
                out["verified"] = True
            except Exception as e:  # XLA's verdict is the result being reported
                out["error"] = first_line(e)
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
