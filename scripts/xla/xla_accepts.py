#!/usr/bin/env python3
"""Which modules of a corpus (scripts/xla/extract_corpus.py's JSON lines) a real XLA accepts.

Usage: xla_accepts.py <corpus.jsonl>
Prints one JSON object per module: {"id", "parsed": bool, "verified": bool, "error"?: str}.
"parsed" is XLA's text parser (jaxlib's hlo_module_from_text); "verified" is XLA's proto loader
with its verifier (HloModule::CreateFromProto through hlo_to_stablehlo) on the module XLA parsed.
scripts/xla/measure_dialect.ts --xla runs it; jaxlib is a development-time tool here, never a
dependency of Kiln.

jaxlib dies on some of XLA's own test modules (a segmentation fault importing a send/recv module,
SIGFPE folding an integer division by zero), so the modules run in a worker process: when it
dies, the module it was on is parsed again alone (parse only) and reported as not verified
(error "XLA crashed ..."), and a new worker goes on from the next one. A module that takes
longer than TIMEOUT_S is treated the same way.
"""
import json
import os
import select
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Seconds a module may take: a few of XLA's test modules have huge shapes that jaxlib's import
# materializes.
TIMEOUT_S = 30


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else type(e).__name__


def worker(path, start, parse_only=False):
    """Judges modules from index `start` on (only that one, parse_only), one JSON line each."""
    from jaxlib import _hlo, _jax

    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for line in lines[start:start + 1] if parse_only else lines[start:]:
        m = json.loads(line)
        out = {"id": m["id"], "parsed": False, "verified": False}
        try:
            module = _hlo.hlo_module_from_text(m["text"])
            out["parsed"] = True
            if parse_only:
                raise RuntimeError("XLA crashed importing and verifying the parsed module")
            _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
            out["verified"] = True
        except Exception as e:  # XLA's verdict is the result being reported
            out["error"] = first_line(e)
        print(json.dumps(out), flush=True)


def main():
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        ids = [json.loads(line)["id"] for line in f if line.strip()]
    done = 0
    while done < len(ids):
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", path, str(done)],
            stdout=subprocess.PIPE,
            text=True,
        )
        timed_out = False
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT_S)
            if not ready:
                proc.kill()
                timed_out = True
                break
            line = proc.stdout.readline()
            if not line:
                break
            print(line, end="", flush=True)
            done += 1
        rc = proc.wait()
        if done < len(ids):
            why = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
            if timed_out:
                why = f"no verdict in {TIMEOUT_S} s"
            try:
                again = subprocess.run(
                    [sys.executable, __file__, "--parse-only", path, str(done)],
                    stdout=subprocess.PIPE,
                    text=True,
                    timeout=TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                again = None
            if again is not None and again.returncode == 0 and again.stdout.strip():
                verdict = json.loads(again.stdout)
            else:
                verdict = {"id": ids[done], "parsed": False, "verified": False}
            verdict["error"] = f"XLA crashed ({why}): " + verdict.get("error", "parsing")
            print(json.dumps(verdict), flush=True)
            done += 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] in ("--worker", "--parse-only"):
        worker(sys.argv[2], int(sys.argv[3]), parse_only=sys.argv[1] == "--parse-only")
    else:
        main()
