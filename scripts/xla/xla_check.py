#!/usr/bin/env python3
"""Checks Kiln-written HLO against a real XLA (jaxlib), for test/xla/xla.test.ts.

Reads a JSON job list on stdin:
  [{"name", "proto": path, "text"?: path of Kiln's HLO text, "inputs"?: [{"dtype", "shape", "data"}]}]
and prints one JSON object per job on stdout:
  {"name", "loaded": bool, "textLoaded"?: bool, "error"?: str, "text"?: XLA's HLO text,
   "proto"?: path of XLA's proto, "outputs"?: [{"dtype", "shape", "data", "ints"?}]}
"loaded" is XLA's proto loader (HloModule::CreateFromProto, through hlo_to_stablehlo);
"textLoaded" is XLA's text parser (hlo_module_from_text) on Kiln's printed text; "text" and
"proto" are XLA's own print and serialization of the module it loaded; "outputs" come from
compiling the module for XLA's CPU backend and running it on the job's inputs. One process serves
every job, so jaxlib is imported once.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import jax  # noqa: E402
from jaxlib import _hlo, _jax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def first_line(e):
    return str(e).strip().splitlines()[0][:400] if str(e).strip() else type(e).__name__


def xla_computation(data):
    """jaxlib's XlaComputation over serialized HloModuleProto bytes (its class is not exported)."""
    from jax._src.lib import xla_client

    return xla_client.XlaComputation(data)


def finite_or_name(v):
    """JSON has no NaN or infinities: they travel as the strings "nan", "inf" and "-inf"."""
    v = float(v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


def output(a):
    """One output: dtype, shape, its values as floats, and for an integer or pred array also each
    value as exact decimal text ("ints"; JSON numbers lose 64-bit integers)."""
    out = {
        "dtype": str(a.dtype),
        "shape": list(a.shape),
        "data": [finite_or_name(v) for v in a.astype(np.float64).ravel()],
    }
    if a.dtype.kind in "iub":
        out["ints"] = [str(int(v)) for v in a.ravel().tolist()]
    return out


def main():
    jobs = json.load(sys.stdin)
    client = jax.devices("cpu")[0].client
    devices = _jax.DeviceList(tuple(client.local_devices()[:1]))
    for job in jobs:
        out = {"name": job["name"], "loaded": False}
        try:
            with open(job["proto"], "rb") as f:
                data = f.read()
            mlir = _jax.mlir.hlo_to_stablehlo(data)
            out["loaded"] = True
            # The module as XLA holds it (HloModule::CreateFromProto), printed and serialized by
            # XLA itself; not the StableHLO round trip, which restructures the module.
            module = xla_computation(data).get_hlo_module()
            options = _hlo.HloPrintOptions()
            options.print_large_constants = True
            out["text"] = module.to_string(options)
            if "text" in job:
                # Kiln's HLO text, through XLA's own text parser.
                with open(job["text"], encoding="utf-8") as f:
                    _hlo.hlo_module_from_text(f.read())
                out["textLoaded"] = True
            xla_proto = job["proto"] + ".xla.pb"
            with open(xla_proto, "wb") as f:
                f.write(module.as_serialized_hlo_module_proto())
            out["proto"] = xla_proto
            if "inputs" in job:
                exe = client.compile_and_load(mlir, devices, _jax.CompileOptions())
                args = [
                    jax.device_put(np.array(i["data"], dtype=i["dtype"]).reshape(i["shape"]))
                    for i in job["inputs"]
                ]
                res = exe.execute_sharded(args).disassemble_into_single_device_arrays()
                out["outputs"] = [output(np.asarray(r[0])) for r in res]
        except Exception as e:  # XLA's errors are the result being checked
            out["error"] = first_line(e)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
