#!/usr/bin/env python3
"""A random hostile-input run of the `opforge` command line (issue 16).

For SECONDS, picks random ops from `opforge ops export`, random attrs of
every type (huge, negative, empty, wrong), random dtypes, shapes with zero
and huge dims, missing and extra inputs, and runs them through
`opforge exec` (eager kernels), `opforge shape infer` (shape functions) and
`opforge graph run` (graph import, shape inference, the session), in
batches, each process under an address-space limit and a timeout.

A finding is: a process killed by a signal (abort, segfault), a hang (the
timeout), a line without a JSON answer, or an Internal error that reports a
panic. Each finding is written with its reproducer to the findings
directory and listed at the end; the exit status is 1 if there was any.

    scripts/hostile-cli [SECONDS] [--binary target/debug/opforge] [--seed N]

The run is deterministic for a seed (the default seed is random and
printed).
"""

import argparse
import base64
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

DTYPES = [
    "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8",
    "DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8",
    "DT_QUINT8", "DT_QINT32", "DT_BFLOAT16", "DT_QINT16", "DT_QUINT16",
    "DT_UINT16", "DT_COMPLEX128", "DT_HALF", "DT_RESOURCE", "DT_UINT32",
    "DT_UINT64", "DT_VARIANT",
]
HUGE = [2**31, 2**31 - 1, 2**32, 2**40, 2**62, 2**63 - 1]
INTS = [0, 1, -1, 2, 3, 4, 7, -2, 255, 2**31 - 1, -2**31, 2**63 - 1, -2**63] + HUGE
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e38, -1e38, 1e308, "nan", "inf", "-inf", 3.0, 255.0]
STRINGS = ["", "a", "NHWC", "NCHW", "SAME", "VALID", "EXPLICIT", "MIN_COMBINED",
           "MIN_FIRST", "SCALED", "HALF_TO_EVEN", "HALF_UP", "REFLECT", "SYMMETRIC",
           "\u00ff\u0000", "x" * 300]
# Limits for the child processes.
ADDRESS_SPACE = 4 << 30
TIMEOUT = 120


def rnd_dims(r):
    rank = r.choice([0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 8])
    dims = []
    for _ in range(rank):
        dims.append(r.choice([0, 1, 1, 2, 2, 3, 4, 5, 7] + ([r.choice(HUGE)] if r.random() < 0.15 else [])))
    return dims


def count(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def rnd_value(r, dtype):
    if dtype in ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16"):
        v = r.choice(FLOATS + [r.uniform(-10, 10)])
        # JSON has no NaN literal; the codec reads the strings.
        if dtype in ("DT_HALF", "DT_BFLOAT16") and isinstance(v, float) and abs(v) > 60000:
            v = 1.5
        if dtype == "DT_FLOAT" and isinstance(v, float) and abs(v) > 3e38:
            v = -2.5
        return v
    if dtype in ("DT_COMPLEX64", "DT_COMPLEX128"):
        return [rnd_value(r, "DT_FLOAT"), rnd_value(r, "DT_FLOAT")]
    if dtype == "DT_BOOL":
        return r.random() < 0.5
    if dtype == "DT_STRING":
        return r.choice(STRINGS[:6] + ["-", "1e5", "0x1f", "  7 "])
    if dtype == "DT_RESOURCE":
        return {"name": r.choice(["v", "", "x" * 50]), "container": "", "type_name": ""}
    lo, hi = {
        "DT_INT8": (-128, 127), "DT_QINT8": (-128, 127), "DT_UINT8": (0, 255),
        "DT_QUINT8": (0, 255), "DT_INT16": (-32768, 32767), "DT_QINT16": (-32768, 32767),
        "DT_UINT16": (0, 65535), "DT_QUINT16": (0, 65535), "DT_INT32": (-2**31, 2**31 - 1),
        "DT_QINT32": (-2**31, 2**31 - 1), "DT_UINT32": (0, 2**32 - 1),
        "DT_INT64": (-2**63, 2**63 - 1), "DT_UINT64": (0, 2**64 - 1),
    }.get(dtype, (0, 1))
    cands = [v for v in INTS if lo <= v <= hi] + [lo, hi]
    return r.choice(cands + [r.randint(max(lo, -5), min(hi, 9))] * 4)


def rnd_tensor(r, dtype=None, dims=None):
    dtype = dtype or r.choice(DTYPES[:-1])
    dims = rnd_dims(r) if dims is None else dims
    n = count(dims)
    if n > 64:
        # Too many to list: make it empty by a zero dim somewhere, keeping
        # the huge dims (the interesting part).
        dims = dims + [0] if r.random() < 0.5 else [0] + dims
        n = 0
    return {"dtype": dtype, "shape": dims, "values": [rnd_value(r, dtype) for _ in range(n)]}


def rnd_shape_proto(r):
    if r.random() < 0.1:
        return {"unknown_rank": True}
    return {"dim": [{"size": r.choice([-1, 0, 1, 2, 3] + HUGE[:2])} for _ in range(r.choice([0, 1, 2, 3]))]}


def rnd_attr(r, attr, op):
    t = attr["type"]
    allowed = attr.get("allowed_values", {}).get("list", {})
    if t == "int":
        lo = int(attr.get("minimum", -2**63)) if attr.get("has_minimum") else -2**63
        v = r.choice(INTS) if r.random() < 0.7 else max(lo, r.randint(-3, 6))
        return {"i": v}
    if t == "float":
        v = r.choice(FLOATS)
        return {"f": v if not isinstance(v, str) else {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[v]}
    if t == "bool":
        return {"b": r.random() < 0.5}
    if t == "string":
        opts = allowed.get("s")
        if opts and r.random() < 0.8:
            return {"s": r.choice(opts)}
        return {"s": base64.b64encode(r.choice(STRINGS).encode()).decode()}
    if t == "type":
        opts = allowed.get("type")
        if opts and r.random() < 0.85:
            return {"type": r.choice(opts)}
        return {"type": r.choice(DTYPES)}
    if t == "shape":
        return {"shape": rnd_shape_proto(r)}
    if t == "tensor":
        tt = rnd_tensor(r, dims=r.choice([[], [2], [0], [1, 3]]))
        return {"tensor": tensor_proto(tt)}
    if t == "func":
        return {"func": {"name": r.choice(["", "f", "NoSuchFunction"])}}
    if t.startswith("list("):
        inner = t[5:-1]
        n = r.choice([0, 1, 2, 3, 4, 5])
        if inner == "int":
            return {"list": {"i": [r.choice(INTS + [0, 1, 2, 1, 2]) for _ in range(n)]}}
        if inner == "float":
            return {"list": {"f": [r.choice([0.0, 1.0, -1.0, 0.5, 2.0]) for _ in range(n)]}}
        if inner == "type":
            opts = allowed.get("type") or DTYPES
            return {"list": {"type": [r.choice(opts) for _ in range(n)]}}
        if inner == "shape":
            return {"list": {"shape": [rnd_shape_proto(r) for _ in range(n)]}}
        if inner == "string":
            return {"list": {"s": [base64.b64encode(r.choice(STRINGS).encode()).decode() for _ in range(n)]}}
        if inner == "bool":
            return {"list": {"b": [r.random() < 0.5 for _ in range(n)]}}
        if inner == "tensor":
            return {"list": {"tensor": [tensor_proto(rnd_tensor(r, dims=[1])) for _ in range(n)]}}
        if inner == "func":
            return {"list": {"func": [{"name": "f"} for _ in range(n)]}}
    return None


def tensor_proto(t):
    """The proto3 JSON of a TensorProto for a (small) JSON tensor."""
    dtype, dims, values = t["dtype"], t["shape"], t["values"]
    p = {"dtype": dtype, "tensor_shape": {"dim": [{"size": str(d)} for d in dims]}}
    field = {
        "DT_FLOAT": "float_val", "DT_DOUBLE": "double_val", "DT_INT64": "int64_val",
        "DT_BOOL": "bool_val", "DT_STRING": "string_val", "DT_UINT32": "uint32_val",
        "DT_UINT64": "uint64_val",
    }.get(dtype, "int_val")
    if dtype in ("DT_HALF", "DT_BFLOAT16", "DT_COMPLEX64", "DT_COMPLEX128", "DT_RESOURCE"):
        return p
    conv = []
    for v in values:
        if field == "string_val":
            conv.append(base64.b64encode(str(v).encode()).decode())
        elif field in ("float_val", "double_val"):
            conv.append({"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(v, v) if isinstance(v, str) else v)
        elif field in ("int64_val", "uint64_val"):
            conv.append(str(v))
        else:
            conv.append(v)
    p[field] = conv
    return p


def arg_count(arg, attrs):
    if arg.get("number_attr"):
        v = attrs.get(arg["number_attr"], {}).get("i", 1)
        return v if isinstance(v, int) and 0 <= v <= 6 else 2
    if arg.get("type_list_attr"):
        return len(attrs.get(arg["type_list_attr"], {}).get("list", {}).get("type", []))
    return 1


def arg_dtype(r, arg, attrs, i):
    if arg.get("type"):
        return arg["type"]
    if arg.get("type_attr"):
        t = attrs.get(arg["type_attr"], {}).get("type")
        if t:
            return t
    if arg.get("type_list_attr"):
        lst = attrs.get(arg["type_list_attr"], {}).get("list", {}).get("type", [])
        if i < len(lst):
            return lst[i]
    return r.choice(DTYPES[:-1])


def rnd_call(r, op):
    """One random call of `op`: attrs and inputs, mostly consistent with
    the OpDef, sometimes not."""
    attrs = {}
    for a in op.get("attr", []):
        if "default_value" in a and r.random() < 0.4:
            continue
        v = rnd_attr(r, a, op)
        if v is not None:
            attrs[a["name"]] = v
    inputs = []
    same_dims = rnd_dims(r) if r.random() < 0.6 else None
    for arg in op.get("input_arg", []):
        for i in range(arg_count(arg, attrs)):
            dtype = arg_dtype(r, arg, attrs, i)
            if dtype == "DT_VARIANT":
                dtype = "DT_FLOAT"
            dims = same_dims if (same_dims is not None and r.random() < 0.7) else None
            if dtype in ("DT_INT32", "DT_INT64") and r.random() < 0.5:
                # Index-like inputs: small vectors of interesting values.
                dims = r.choice([[], [1], [2], [3], [0], [4]])
            inputs.append(rnd_tensor(r, dtype, dims))
    mode = r.random()
    if mode < 0.07 and inputs:
        inputs.pop(r.randrange(len(inputs)))  # a missing input
    elif mode < 0.1:
        inputs.append(rnd_tensor(r))  # an extra input
    elif mode < 0.14 and inputs:
        k = r.randrange(len(inputs))
        inputs[k] = rnd_tensor(r)  # a wrong dtype or shape
    return {"op": op["name"], "node_def": {"attr": attrs}, "inputs": inputs}


def shape_case(r, call):
    """The `shape infer` case of a call: input shapes (partial, unknown) and
    some input tensors' values."""
    ins = []
    tensors = {}
    for i, t in enumerate(call["inputs"]):
        c = r.random()
        if c < 0.15:
            ins.append("?")
        else:
            dims = [("?" if r.random() < 0.2 else str(d)) for d in t["shape"]]
            ins.append("[" + ",".join(dims) + "]")
            if t["dtype"] in ("DT_INT32", "DT_INT64") and r.random() < 0.6 and count(t["shape"]) <= 64:
                tensors[str(i)] = t
    if r.random() < 0.1 and ins:
        ins.pop()
    return {"op": call["op"], "node_def": call["node_def"], "ins": ";".join(ins), "input_tensors": tensors}


def graph_case(call):
    """A GraphDef (text) of Const nodes feeding the op, and its request."""
    nodes = []
    names = []
    for i, t in enumerate(call["inputs"]):
        if t["dtype"] in ("DT_RESOURCE", "DT_HALF", "DT_BFLOAT16", "DT_COMPLEX64", "DT_COMPLEX128"):
            continue
        name = f"in{i}"
        names.append(name)
        nodes.append({"name": name, "op": "Const", "attr": {
            "dtype": {"type": t["dtype"]}, "value": {"tensor": tensor_proto(t)}}})
    nodes.append({"name": "op", "op": call["op"], "input": names, "attr": call["node_def"]["attr"]})
    return {"node": nodes}, {"feeds": {}, "fetches": ["op:0"], "targets": []}


ENUM_KEYS = {"type", "dtype"}
BYTES_KEYS = {"s", "string_val"}
FLOAT_WORDS = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def text_value(key, v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if key in ENUM_KEYS:
        return v
    if key in BYTES_KEYS:
        raw = base64.b64decode(v)
        return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03o}" for b in raw) + '"'
    if isinstance(v, str):
        if v in FLOAT_WORDS:
            return FLOAT_WORDS[v]
        if key in ("name", "op", "input", "key"):
            return json.dumps(v)
        return v  # an int64 written as a decimal string
    return repr(v) if isinstance(v, float) else str(v)


def to_text(obj):
    """Protobuf text format of a proto3-JSON-like dict (the GraphDef subset
    this script writes: maps only under `attr`)."""
    out = []
    for key, v in obj.items():
        if key == "attr" and isinstance(v, dict):
            for k, av in v.items():
                out.append(f"attr {{ key: {json.dumps(k)} value {{ {to_text(av)} }} }}")
            continue
        for item in (v if isinstance(v, list) else [v]):
            if isinstance(item, dict):
                out.append(f"{key} {{ {to_text(item)} }}")
            else:
                out.append(f"{key}: {text_value(key, item)}")
    return " ".join(out)


def limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(binary, args, stdin_text):
    try:
        p = subprocess.run([binary] + args, input=stdin_text.encode(), capture_output=True,
                           timeout=TIMEOUT, preexec_fn=limit_child)
    except subprocess.TimeoutExpired:
        return None, "", "timeout"
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def bad_answer(line):
    try:
        v = json.loads(line)
    except ValueError:
        return "not JSON: " + line[:200]
    err = v.get("error")
    if err is not None:
        msg = err if isinstance(err, str) else json.dumps(err)
        if "panicked" in msg or "panic" in msg.lower():
            return "panic: " + msg[:500]
        if isinstance(err, dict) and not err.get("message"):
            return "error without a message: " + msg[:200]
    elif "outputs" not in v:
        return "neither outputs nor error: " + line[:200]
    return None


def check_batch(binary, args, lines):
    """Runs a batch; on a crash or hang, bisects to the line(s) that cause
    it. Returns findings as (kind, line)."""
    code, out, err = run(binary, args, "".join(l + "\n" for l in lines))
    findings = []
    if code == 0 or (code is not None and code > 0 and out.count("\n") == len(lines)):
        for l, answer in zip(lines, out.splitlines()):
            bad = bad_answer(answer)
            if bad:
                findings.append((bad, l))
        return findings
    what = "hang" if code is None else (f"signal {-code}" if code < 0 else f"exit {code}: {err[-300:]}")
    if len(lines) == 1:
        return [(what, lines[0])]
    half = len(lines) // 2
    return check_batch(binary, args, lines[:half]) + check_batch(binary, args, lines[half:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seconds", nargs="?", type=float, default=1800)
    ap.add_argument("--binary", default="target/debug/opforge")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--findings", default="target/hostile-cli")
    ap.add_argument("--batch", type=int, default=40)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    print(f"hostile-cli: seed {seed}, {a.seconds:.0f} s, binary {a.binary}", flush=True)
    r = random.Random(seed)
    ops = json.loads(subprocess.run([a.binary, "ops", "export", "--format", "json"],
                                    capture_output=True, check=True).stdout)["op"]
    os.makedirs(a.findings, exist_ok=True)
    end = time.time() + a.seconds
    stats = {"exec": 0, "shape": 0, "graph": 0}
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        while time.time() < end:
            calls = [rnd_call(r, r.choice(ops)) for _ in range(a.batch)]
            kind = r.choice(["exec", "exec", "shape", "graph"])
            if kind == "exec":
                lines = [json.dumps(c) for c in calls]
                got = check_batch(a.binary, ["exec", "--jsonl", "-"], lines)
            elif kind == "shape":
                lines = [json.dumps(shape_case(r, c)) for c in calls]
                got = check_batch(a.binary, ["shape", "infer", "--jsonl", "-"], lines)
            else:
                got = []
                for c in calls[: max(1, a.batch // 8)]:
                    g, req = graph_case(c)
                    gp, rp = os.path.join(tmp, "g.pbtxt"), os.path.join(tmp, "r.json")
                    with open(gp, "w") as f:
                        f.write(to_text(g))
                    with open(rp, "w") as f:
                        json.dump(req, f)
                    code, out, err = run(a.binary, ["graph", "run", "--graph", gp, "--request", rp], "")
                    lines_out = out.strip().splitlines()
                    if code is None or code < 0:
                        got.append(("hang" if code is None else f"signal {-code}", to_text(g)))
                    elif code == 0 and lines_out:
                        bad = bad_answer(lines_out[-1])
                        if bad:
                            got.append((bad, to_text(g)))
                    elif code != 0 and "panick" in err:
                        got.append(("panic: " + err[-300:], to_text(g)))
            stats[kind] += len(calls) if kind != "graph" else max(1, a.batch // 8)
            for what, line in got:
                findings.append((kind, what, line))
                path = os.path.join(a.findings, f"finding-{len(findings):03d}.txt")
                with open(path, "w") as f:
                    f.write(f"{kind}: {what}\n{line}\n")
                print(f"FINDING ({kind}) {what[:200]}\n  {line[:300]}", flush=True)
    print(f"hostile-cli: {stats['exec']} exec calls, {stats['shape']} shape cases, "
          f"{stats['graph']} graphs; {len(findings)} findings (seed {seed})", flush=True)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
