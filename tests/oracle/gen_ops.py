#!/usr/bin/env python3
"""Writes the PyTorch reference data for kiln's op oracle test.

Every case names a kiln op (as registered), its attributes, seeded random
inputs and the equivalent torch expression. For each dtype a case runs in,
this script stores the inputs, torch's outputs and, for differentiable
cases, the gradients of loss = sum(out * cot) with respect to the float
inputs (cot: seeded random, one per output). Everything goes into one
safetensors file; its __metadata__ "cases" entry is a JSON list describing
the cases, which tests/ops/ops_oracle_test.cc replays against kiln.

The reference is computed at a higher precision than the case runs in, from
the same rounded inputs (REF_DTYPE), so the tolerances measure kiln's error
only.
"""
import argparse
import json
import os
import struct
import zlib

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a failure, not a skip: the oracle tests need torch
    raise SystemExit(f"gen_ops.py: {e}; install torch and numpy with scripts/setup.sh")

# --- Precision policy: the one place tolerances live. ----------------------
# A value passes when |kiln - ref| <= atol + rtol * |ref|. Integer and bool
# outputs must match exactly.
TOL = {
    "f64": {"rtol": 1e-12, "atol": 1e-14},
    "f32": {"rtol": 1e-5, "atol": 1e-6},
    "bf16": {"rtol": 1e-2, "atol": 2e-3},  # bf16 keeps 8 bits: one rounding is <= 2^-9
}
# Gradients go through the vjp rules' chains of ops, each rounding in the
# case's dtype, so they get more room.
GRAD_TOL = {
    "f64": {"rtol": 1e-11, "atol": 1e-13},
    "f32": {"rtol": 1e-4, "atol": 1e-5},
    "bf16": {"rtol": 2e-2, "atol": 5e-3},
}
# The dtype torch computes the reference in, per case dtype.
REF_DTYPE = {"f64": torch.float64, "f32": torch.float64, "bf16": torch.float32,
             "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}

TORCH = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
         "f16": torch.float16, "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}
NAME = {v: k for k, v in TORCH.items()}
SAFETENSORS = {"f32": "F32", "f64": "F64", "bf16": "BF16", "f16": "F16",
               "i32": "I32", "i64": "I64", "bool": "BOOL"}
FLOATS = ("f32", "f64")


# --- Inputs. -----------------------------------------------------------------
class In:
    """One input: `kind` says how values are drawn; `dtype` None means the
    case's dtype. transpose=True stores the last two dims swapped and has the
    test transpose it back, so the op sees a non-contiguous view."""

    def __init__(self, kind, shape, lo=-1.0, hi=1.0, dtype=None, transpose=False, values=None):
        self.kind, self.shape, self.lo, self.hi, self.values = kind, list(shape), lo, hi, values
        self.dtype, self.transpose = dtype, transpose


def X(shape, lo=-1.0, hi=1.0, **kw):  # uniform in [lo, hi)
    return In("uniform", shape, lo, hi, **kw)


def Pos(shape, lo=0.5, hi=2.0, **kw):  # positive domain
    return In("uniform", shape, lo, hi, **kw)


def Away(shape, lo=0.5, hi=2.0, **kw):  # |x| in [lo, hi), random sign
    return In("away", shape, lo, hi, **kw)


def Distinct(shape, **kw):
    """Values no other Distinct element of the case shares (no ties, even in
    bf16): multiples of 1/32 in [-4, 4], drawn without replacement."""
    return In("distinct", shape, **kw)


def Ints(shape, lo, hi, dtype="i64", **kw):  # integers in [lo, hi]
    return In("ints", shape, lo, hi, dtype=dtype, **kw)


def Grid(shape, lo=-2, hi=2, **kw):  # integers in [lo, hi] in the case dtype (makes ties)
    return In("ints", shape, lo, hi, **kw)


def Choice(shape, values, dtype="i64", **kw):  # drawn from `values` (e.g. class ids)
    return In("choice", shape, dtype=dtype, values=values, **kw)


def Fixed(values, dtype="i64", **kw):  # exactly these values (e.g. group sizes)
    return In("fixed", [len(values)], dtype=dtype, values=values, **kw)


def Bools(shape, **kw):
    return In("bools", shape, dtype="bool", **kw)


class Case:
    """`fn` is the torch expression, called with the inputs (ops without
    inputs get the case's torch dtype instead). `tol_scale` widens the
    dtype's tolerances for a case whose error grows with its size (long
    reductions); `out_dtype(case dtype)` gives kiln's output dtype where it
    differs from torch's (by default, torch run at the case dtype decides)."""

    def __init__(self, name, op, inputs, fn, attrs=None, dtypes=FLOATS, bf16=False, grad=True,
                 tol_scale=1.0, out_dtype=None):
        self.name, self.op, self.inputs, self.fn = name, op, inputs, fn
        self.attrs = attrs or {}
        self.dtypes = tuple(dtypes) + (("bf16",) if bf16 else ())
        self.grad, self.tol_scale, self.out_dtype = grad, tol_scale, out_dtype


class DT:
    """An attribute of kind dtype; DT("$") is the case's dtype."""

    def __init__(self, name):
        self.name = name


def encode_attrs(attrs, dtype):
    out = {}
    for k, v in attrs.items():
        if isinstance(v, DT):
            out[k] = ["dtype", dtype if v.name == "$" else v.name]
        elif isinstance(v, bool):
            out[k] = ["bool", v]
        elif isinstance(v, int):
            out[k] = ["int", v]
        elif isinstance(v, float):
            out[k] = ["float", v]
        elif isinstance(v, str):
            out[k] = ["string", v]
        elif isinstance(v, (list, tuple)):
            out[k] = ["ints", [int(i) for i in v]]
        else:
            raise TypeError(f"attribute {k}: unsupported value {v!r}")
    return out


def make_input(spec, dtype, rng, distinct):
    dt = spec.dtype or dtype
    shape = list(spec.shape)
    if spec.transpose:
        shape[-2], shape[-1] = shape[-1], shape[-2]
    n = int(np.prod(shape, dtype=np.int64))
    if spec.kind == "bools":
        v = rng.random(n) < 0.5
    elif spec.kind == "ints" or (spec.kind == "uniform" and dt in ("i32", "i64")):
        v = rng.integers(int(spec.lo), int(spec.hi), n, endpoint=True)
    elif spec.kind == "uniform":
        v = rng.uniform(spec.lo, spec.hi, n)
    elif spec.kind == "away":
        v = rng.uniform(spec.lo, spec.hi, n) * rng.choice([-1.0, 1.0], n)
    elif spec.kind == "fixed":
        v = np.asarray(spec.values)
    elif spec.kind == "choice":
        v = rng.choice(np.asarray(spec.values), n)
    elif spec.kind == "distinct":
        v, distinct[:] = np.array(distinct[:n]) / 32.0, distinct[n:]
        assert len(v) == n, "too many Distinct elements in one case"
    else:
        raise ValueError(spec.kind)
    t = torch.from_numpy(np.asarray(v).reshape(shape)).to(TORCH[dt])
    return t.transpose(-2, -1) if spec.transpose else t


# --- The cases. ----------------------------------------------------------------
SHAPE_PAIRS = [  # broadcasting patterns for binary ops
    ("same", [3, 4], [3, 4]),
    ("row", [2, 3, 4], [4]),
    ("outer", [2, 1, 4], [3, 1]),
    ("scalar", [], [2, 3]),
    ("one", [1], [5]),
]


def unary_cases():
    spec = [  # name, torch fn, input, in bf16 too
        ("neg", torch.neg, X([3, 4]), True),
        ("abs", torch.abs, Away([2, 3, 4], 0.1, 2), False),
        ("exp", torch.exp, X([2, 3, 4], -3, 3), True),
        ("log", torch.log, Pos([3, 4], 0.1, 5), True),
        ("sqrt", torch.sqrt, Pos([3, 4], 0.1, 5), False),
        ("rsqrt", torch.rsqrt, Pos([3, 4], 0.1, 5), True),
        ("reciprocal", torch.reciprocal, Away([3, 4], 0.5, 3), False),
        ("square", torch.square, X([3, 4], -3, 3), False),
        ("tanh", torch.tanh, X([3, 4], -3, 3), True),
        ("sigmoid", torch.sigmoid, X([3, 4], -6, 6), False),
        ("silu", F.silu, X([2, 3, 4], -5, 5), True),
        ("sin", torch.sin, X([3, 4], -4, 4), False),
        ("cos", torch.cos, X([3, 4], -4, 4), False),
        ("erf", torch.erf, X([3, 4], -2.5, 2.5), False),
        ("sign", torch.sign, Away([3, 4], 0.1, 2), False),
    ]
    cases = [Case(n, n, [x], fn, bf16=b) for n, fn, x, b in spec]
    cases += [
        Case("gelu", "gelu", [X([2, 3, 4], -4, 4)], F.gelu, bf16=True),
        Case("gelu_tanh", "gelu", [X([2, 3, 4], -4, 4)],
             lambda x: F.gelu(x, approximate="tanh"), {"tanh_approximation": True}, bf16=True),
        # Edge shapes and layouts.
        Case("exp_scalar", "exp", [X([])], torch.exp),
        Case("exp_size1", "exp", [X([1, 5, 1])], torch.exp),
        Case("exp_empty", "exp", [X([0, 3])], torch.exp),
        Case("tanh_strided", "tanh", [X([4, 3], -2, 2, transpose=True)], torch.tanh, bf16=True),
        Case("logical_not", "logical_not", [Bools([3, 4])], torch.logical_not, dtypes=["bool"],
             grad=False),
    ]
    for n, fn in [("neg", torch.neg), ("abs", torch.abs), ("square", torch.square),
                  ("sign", torch.sign)]:
        cases.append(Case(f"{n}_int", n, [Grid([3, 4], -5, 5)], fn, dtypes=["i32", "i64"],
                          grad=False))
    return cases


def binary_cases():
    spec = [  # name, torch fn, first input, second input
        ("add", torch.add, X, X),
        ("sub", torch.sub, X, X),
        ("mul", torch.mul, X, X),
        ("div", torch.div, X, lambda s, **kw: Away(s, 0.5, 2, **kw)),
        ("pow", torch.pow, lambda s, **kw: Pos(s, 0.5, 2, **kw), lambda s, **kw: X(s, -2, 2, **kw)),
        ("maximum", torch.maximum, Distinct, Distinct),
        ("minimum", torch.minimum, Distinct, Distinct),
    ]
    cases = []
    for n, fn, a, b in spec:
        for label, sa, sb in SHAPE_PAIRS:
            cases.append(Case(f"{n}_{label}", n, [a(sa), b(sb)], fn, bf16=label == "outer"))
        cases.append(Case(f"{n}_strided", n, [a([3, 4], transpose=True), b([3, 4])], fn))
    for n, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul),
                  ("maximum", torch.maximum), ("minimum", torch.minimum)]:
        cases.append(Case(f"{n}_int", n, [Grid([2, 1, 4], -9, 9), Grid([3, 1], -9, 9)], fn,
                          dtypes=["i32", "i64"], grad=False))
    for n in ["eq", "ne", "lt", "le", "gt", "ge"]:
        fn = getattr(torch, n)
        cases.append(Case(f"{n}_outer", n, [Grid([2, 1, 4]), Grid([3, 1])], fn,
                          dtypes=FLOATS + ("i32", "i64"), bf16=True, grad=False))
    for n in ["logical_and", "logical_or"]:
        cases.append(Case(f"{n}_outer", n, [Bools([2, 1, 4]), Bools([3, 1])],
                          getattr(torch, n), dtypes=["bool"], grad=False))
    cases += [
        Case("where_same", "where", [Bools([3, 4]), X([3, 4]), X([3, 4])], torch.where,
             bf16=True),
        Case("where_bcast", "where", [Bools([3, 1]), X([2, 1, 4]), X([4])], torch.where),
        Case("where_cond_bcast", "where", [Bools([2, 3, 4]), X([3, 1]), X([])], torch.where),
    ]
    return cases


def slice_fn(axis, start, stop, step):
    def fn(x):
        idx = [slice(None)] * x.dim()
        idx[axis] = slice(start, stop, step)
        return x[tuple(idx)]
    return fn


def view_cases():
    x234 = lambda **kw: X([2, 3, 4], **kw)
    return [
        Case("reshape", "reshape", [x234()], lambda x: x.reshape(6, 4), {"shape": [6, 4]},
             bf16=True),
        Case("reshape_flat", "reshape", [x234()], lambda x: x.reshape(24), {"shape": [24]}),
        Case("reshape_scalar", "reshape", [X([1, 1])], lambda x: x.reshape(()), {"shape": []}),
        Case("reshape_strided", "reshape", [X([2, 4, 3], transpose=True)],
             lambda x: x.reshape(4, 6), {"shape": [4, 6]}),
        Case("permute", "permute", [x234()], lambda x: x.permute(2, 0, 1), {"dims": [2, 0, 1]},
             bf16=True),
        Case("permute_negative", "permute", [x234()], lambda x: x.permute(2, 0, 1),
             {"dims": [-1, 0, 1]}),
        Case("slice_step", "slice", [x234()], slice_fn(1, 1, 3, 2),
             {"axis": 1, "start": 1, "stop": 3, "step": 2}, bf16=True),
        Case("slice_negative", "slice", [X([3, 7])], slice_fn(1, -5, 100, 1),
             {"axis": -1, "start": -5, "stop": 100}),
        Case("slice_step3", "slice", [X([10, 2])], slice_fn(0, 1, 9, 3),
             {"axis": 0, "start": 1, "stop": 9, "step": 3}),
        Case("slice_empty", "slice", [X([4, 3])], slice_fn(0, 3, 1, 1),
             {"axis": 0, "start": 3, "stop": 1}),
        Case("expand", "expand", [X([3, 1])], lambda x: x.expand(2, 3, 4),
             {"shape": [2, 3, 4]}, bf16=True),
        Case("expand_keep", "expand", [X([1, 3, 1])], lambda x: x.expand(2, -1, 4),
             {"shape": [2, -1, 4]}),
        Case("squeeze", "squeeze", [X([3, 1, 4])], lambda x: x.squeeze(1), {"axis": 1}),
        Case("squeeze_last", "squeeze", [X([3, 1])], lambda x: x.squeeze(-1), {"axis": -1}),
        Case("unsqueeze", "unsqueeze", [X([3, 4])], lambda x: x.unsqueeze(0), {"axis": 0}),
        Case("unsqueeze_mid", "unsqueeze", [X([3, 4])], lambda x: x.unsqueeze(1), {"axis": 1}),
        Case("unsqueeze_end", "unsqueeze", [X([3, 4])], lambda x: x.unsqueeze(-1), {"axis": -1}),
        Case("slice_scatter", "slice_scatter", [X([4, 5]), X([4, 2])],
             lambda b, s: torch.slice_scatter(b, s, dim=1, start=1, end=5, step=2),
             {"axis": 1, "start": 1, "stop": 5, "step": 2}, bf16=True),
        Case("slice_scatter_rows", "slice_scatter", [X([5, 3]), X([2, 3])],
             lambda b, s: torch.slice_scatter(b, s, dim=0, start=-2, end=5),
             {"axis": 0, "start": -2, "stop": 5}),
        Case("copy_strided", "copy", [X([4, 3], transpose=True)], lambda x: x.clone(),
             bf16=True),
        Case("copy_int", "copy", [Grid([3, 4], -9, 9)], lambda x: x.clone(),
             dtypes=["i32", "i64"], grad=False),
    ]


def creation_cases():
    every = ("f32", "f64", "bf16", "i32", "i64")
    return [
        Case("full", "full", [], lambda dt: torch.full((2, 3), 1.5 if dt.is_floating_point else 7,
                                                       dtype=dt),
             {"shape": [2, 3], "value": 1.5, "dtype": DT("$")}, dtypes=("f32", "f64", "bf16"),
             grad=False),
        Case("full_int", "full", [], lambda dt: torch.full((4,), -7, dtype=dt),
             {"shape": [4], "value": -7.0, "dtype": DT("$")}, dtypes=("i32", "i64"), grad=False),
        Case("full_bool", "full", [], lambda dt: torch.full((2, 2), True, dtype=dt),
             {"shape": [2, 2], "value": 1.0, "dtype": DT("$")}, dtypes=("bool",), grad=False),
        Case("full_scalar", "full", [], lambda dt: torch.full((), 3, dtype=dt),
             {"shape": [], "value": 3, "dtype": DT("$")}, dtypes=every, grad=False),
        Case("arange", "arange", [], lambda dt: torch.arange(1, 10, 2.5, dtype=dt),
             {"start": 1.0, "stop": 10.0, "step": 2.5, "dtype": DT("$")},
             dtypes=("f32", "f64", "bf16"), grad=False),
        Case("arange_int", "arange", [], lambda dt: torch.arange(0, 7, dtype=dt),
             {"stop": 7}, dtypes=("i64",), grad=False),
        Case("arange_down", "arange", [], lambda dt: torch.arange(5, -3, -1.5, dtype=dt),
             {"start": 5, "stop": -3, "step": -1.5, "dtype": DT("$")}, dtypes=FLOATS, grad=False),
        Case("cast_f64", "cast", [X([3, 4])], lambda x: x.to(torch.float64),
             {"dtype": DT("f64")}, dtypes=("f32", "bf16")),
        Case("cast_f32", "cast", [X([3, 4], -100, 100)], lambda x: x.to(torch.float32),
             {"dtype": DT("f32")}, dtypes=("f64", "bf16")),
        Case("cast_bf16", "cast", [X([3, 4], -100, 100)], lambda x: x.to(torch.bfloat16),
             {"dtype": DT("bf16")}, dtypes=FLOATS),
        Case("cast_i64", "cast", [X([3, 4], -5, 5)], lambda x: x.to(torch.int64),
             {"dtype": DT("i64")}, dtypes=FLOATS, bf16=True, grad=False),
        Case("cast_from_int", "cast", [Grid([3, 4], -50, 50)], lambda x: x.to(torch.float32),
             {"dtype": DT("f32")}, dtypes=("i32", "i64"), grad=False),
        Case("cast_i32_i64", "cast", [Grid([3, 4], -50, 50)], lambda x: x.to(torch.int64),
             {"dtype": DT("i64")}, dtypes=("i32",), grad=False),
        Case("cast_to_bool", "cast", [Grid([3, 4], -1, 1)], lambda x: x.to(torch.bool),
             {"dtype": DT("bool")}, dtypes=FLOATS + ("i64",), grad=False),
        Case("cast_from_bool", "cast", [Bools([3, 4])], lambda x: x.to(torch.float32),
             {"dtype": DT("f32")}, dtypes=("bool",), grad=False),
    ]


def matmul_fn(ta=False, tb=False):
    def fn(a, b):
        return torch.matmul(a.transpose(-2, -1) if ta else a, b.transpose(-2, -1) if tb else b)
    return fn


def matmul_cases():
    c = []
    for label, sa, sb, ta, tb, b16 in [
        ("plain", [3, 4], [4, 5], False, False, True),
        ("ta", [4, 3], [4, 5], True, False, False),
        ("tb", [3, 4], [5, 4], False, True, True),
        ("tab", [4, 3], [5, 4], True, True, False),
        ("batched", [2, 3, 4], [2, 4, 5], False, False, True),
        ("bcast_rhs", [2, 3, 4], [4, 5], False, False, False),
        ("bcast_batch", [2, 1, 3, 4], [3, 4, 2], False, False, True),
        ("bcast_batch_tb", [1, 3, 4], [2, 5, 4], False, True, False),
        ("vec", [1, 4], [4, 1], False, False, False),
        ("k1", [3, 1], [1, 5], False, False, False),
        ("deep", [8, 96], [96, 16], False, False, True),
    ]:
        c.append(Case(f"matmul_{label}", "matmul", [X(sa), X(sb)], matmul_fn(ta, tb),
                      {"transpose_a": ta, "transpose_b": tb}, bf16=b16))
    c.append(Case("matmul_strided", "matmul", [X([3, 4], transpose=True), X([4, 5],
                  transpose=True)], matmul_fn(), bf16=True))
    return c


def dims_of(x, axes):  # kiln's axes ([] = all) as a torch dim tuple
    return tuple(axes) if axes else tuple(range(x.dim()))


def reduction_cases():
    c = []
    for label, shape, axes, keep, b16 in [
        ("all", [2, 3, 4], [], False, True),
        ("all_keep", [2, 3, 4], [], True, False),
        ("mid", [2, 3, 4], [1], False, False),
        ("outer_keep", [2, 3, 4], [0, 2], True, True),
        ("last", [3, 5], [-1], False, False),
        ("size1", [3, 1, 4], [1], False, False),
        ("scalar", [], [], False, False),
    ]:
        a = {"axes": axes, "keepdim": keep}
        c += [
            Case(f"sum_{label}", "sum", [X(shape)],
                 lambda x, ax=axes, k=keep: x.sum(dims_of(x, ax), keepdim=k), a, bf16=b16),
            Case(f"mean_{label}", "mean", [X(shape)],
                 lambda x, ax=axes, k=keep: x.mean(dims_of(x, ax), keepdim=k), a, bf16=b16),
            Case(f"max_{label}", "max", [Distinct(shape)],
                 lambda x, ax=axes, k=keep: x.amax(dims_of(x, ax), keepdim=k), a, bf16=b16),
            Case(f"min_{label}", "min", [Distinct(shape)],
                 lambda x, ax=axes, k=keep: x.amin(dims_of(x, ax), keepdim=k), a),
            Case(f"logsumexp_{label}", "logsumexp", [X(shape, -3, 3)],
                 lambda x, ax=axes, k=keep: torch.logsumexp(x, dims_of(x, ax), keepdim=k), a,
                 bf16=b16),
        ]
        if shape and all(shape[d] > 1 for d in (axes or range(len(shape)))):
            for corr in (0, 1):
                c.append(Case(f"var{corr}_{label}", "var", [X(shape)],
                              lambda x, ax=axes, k=keep, cr=corr:
                              torch.var(x, dims_of(x, ax), correction=cr, keepdim=k),
                              {**a, "correction": corr}, bf16=b16))
    # Long reductions: the error grows with the count (a fixed-order f32 sum).
    for n in ["sum", "mean"]:
        c.append(Case(f"{n}_long", n, [X([3, 4000])],
                      lambda x, n=n: getattr(x, n)(1), {"axes": [1]}, bf16=True, tol_scale=10))
    c += [
        Case("var_long", "var", [X([2, 3000], 1, 3)], lambda x: torch.var(x, 1), {"axes": [1]},
             bf16=True, tol_scale=10),
        Case("sum_strided", "sum", [X([3, 4], transpose=True)], lambda x: x.sum(1), {"axes": [1]}),
        # kiln keeps i32 sums in i32; torch promotes them to i64.
        Case("sum_int", "sum", [Grid([3, 4], -9, 9)], lambda x: x.sum(1), {"axes": [1]},
             dtypes=("i32", "i64"), grad=False, out_dtype=lambda dt: dt),
        Case("sum_bool", "sum", [Bools([3, 4])], lambda x: x.sum(0), {"axes": [0]},
             dtypes=("bool",), grad=False),
        Case("max_int", "max", [Grid([3, 4], -9, 9)], lambda x: x.amax(1), {"axes": [1]},
             dtypes=("i32", "i64"), grad=False),
        Case("argmax", "argmax", [Distinct([3, 5])], lambda x: x.argmax(1), {"axis": 1},
             bf16=True, grad=False),
        Case("argmax_keep", "argmax", [Distinct([2, 3, 4])], lambda x: x.argmax(0, keepdim=True),
             {"axis": 0, "keepdim": True}, grad=False),
        Case("argmax_int", "argmax", [Distinct([4, 6])], lambda x: x.argmax(-1), {"axis": -1},
             dtypes=("i64",), grad=False),
    ]
    for n, fn in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        c += [
            Case(f"{n}_last", n, [X([2, 3, 5], -4, 4)], lambda x, f=fn: f(x, -1), {"axis": -1},
                 bf16=True),
            Case(f"{n}_mid", n, [X([2, 3, 5], -4, 4)], lambda x, f=fn: f(x, 1), {"axis": 1}),
            # The vjp rules' sums over 1000-element rows round to bf16.
            Case(f"{n}_wide", n, [X([4, 1000], -10, 10)], lambda x, f=fn: f(x, 1), {"axis": 1},
                 bf16=True, tol_scale=2),
            Case(f"{n}_size1", n, [X([3, 1])], lambda x, f=fn: f(x, 1), {"axis": 1}),
            Case(f"{n}_strided", n, [X([4, 3], transpose=True)], lambda x, f=fn: f(x, -1),
                 {"axis": -1}),
        ]
    return c


def pad_fn(pads, value):
    # kiln: (before, after) per dim from dim 0; F.pad: from the last dim.
    pairs = [pads[i:i + 2] for i in range(0, len(pads), 2)]
    flat = [p for pair in reversed(pairs) for p in pair]
    return lambda x: F.pad(x, flat, value=value)


def shape_cases():
    return [
        Case("concat_rows", "concat", [X([2, 3]), X([4, 3])], lambda a, b: torch.cat([a, b], 0),
             {"axis": 0}, bf16=True),
        Case("concat_three", "concat", [X([2, 1, 4]), X([2, 3, 4]), X([2, 2, 4])],
             lambda *xs: torch.cat(xs, 1), {"axis": 1}),
        Case("concat_last", "concat", [X([3, 2]), X([3, 5], transpose=True)],
             lambda a, b: torch.cat([a, b], -1), {"axis": -1}),
        Case("concat_one", "concat", [X([3, 2])], lambda a: torch.cat([a], 0)),
        Case("concat_int", "concat", [Grid([2, 3], -9, 9), Grid([1, 3], -9, 9)],
             lambda a, b: torch.cat([a, b], 0), dtypes=("i32", "i64"), grad=False),
        Case("split", "split", [X([3, 6])], lambda x: torch.split(x, [1, 3, 2], 1),
             {"sizes": [1, 3, 2], "axis": 1}, bf16=True),
        Case("split_rows", "split", [X([5, 2])], lambda x: torch.split(x, [2, 0, 3], 0),
             {"sizes": [2, 0, 3]}),
        Case("split_one", "split", [X([2, 3, 4])], lambda x: torch.split(x, [4], -1),
             {"sizes": [4], "axis": -1}),
        Case("pad", "pad", [X([2, 3])], pad_fn([1, 2, 0, 3], 0.0), {"pads": [1, 2, 0, 3]},
             bf16=True),
        Case("pad_value", "pad", [X([2, 3, 2])], pad_fn([0, 0, 2, 1, 1, 0], -1.5),
             {"pads": [0, 0, 2, 1, 1, 0], "value": -1.5}),
        Case("pad_none", "pad", [X([2, 3])], pad_fn([0, 0, 0, 0], 0.0), {"pads": [0, 0, 0, 0]}),
        Case("pad_int", "pad", [Grid([2, 3], -9, 9)], pad_fn([1, 0, 0, 2], 4),
             {"pads": [1, 0, 0, 2], "value": 4.0}, dtypes=("i32", "i64"), grad=False),
    ]


def indexing_cases():
    return [
        Case("gather", "gather", [X([3, 5]), Ints([3, 4], 0, 4)],
             lambda x, i: torch.gather(x, 1, i), {"axis": 1}, bf16=True),
        Case("gather_rows", "gather", [X([4, 3, 2]), Ints([6, 2, 2], 0, 3, dtype="i32")],
             lambda x, i: torch.gather(x, 0, i.long()), {"axis": 0}),
        Case("gather_neg_axis", "gather", [X([2, 3, 5]), Ints([2, 3, 2], 0, 4)],
             lambda x, i: torch.gather(x, -1, i), {"axis": -1}),
        Case("scatter_add", "scatter_add", [X([3, 5]), Ints([3, 4], 0, 4), X([3, 4])],
             lambda x, i, s: torch.scatter_add(x, 1, i, s), {"axis": 1}, bf16=True),
        Case("scatter_add_small_index", "scatter_add",
             [X([4, 3]), Ints([5, 2], 0, 3), X([6, 3])],
             # Only src's index-sized corner is read (torch's backward
             # needs it cut out explicitly).
             lambda x, i, s: torch.scatter_add(x, 0, i, s[:5, :2]), {"axis": 0}),
        Case("index_select", "index_select", [X([4, 3]), Ints([6], 0, 3)],
             lambda x, i: torch.index_select(x, 0, i), {"axis": 0}, bf16=True),
        Case("index_select_last", "index_select", [X([2, 3, 5]), Ints([3], 0, 4, dtype="i32")],
             lambda x, i: torch.index_select(x, -1, i), {"axis": -1}),
        Case("index_select_scalar", "index_select", [X([4, 3]), Ints([], 0, 3)],
             lambda x, i: torch.index_select(x, 0, i.reshape(1)), {"axis": 0}),
        Case("index_add", "index_add", [X([4, 3]), Ints([6], 0, 3), X([6, 3])],
             lambda x, i, s: torch.index_add(x, 0, i, s), {"axis": 0}, bf16=True),
        Case("index_add_last", "index_add", [X([2, 5]), Ints([3], 0, 4, dtype="i32"), X([2, 3])],
             lambda x, i, s: torch.index_add(x, 1, i, s), {"axis": 1}),
        Case("embedding", "embedding", [X([10, 4]), Ints([2, 3], 0, 9)],
             lambda w, i: F.embedding(i, w), bf16=True),
        Case("embedding_i32", "embedding", [X([7, 3]), Ints([5], 0, 6, dtype="i32")],
             lambda w, i: F.embedding(i.long(), w)),
        Case("one_hot", "one_hot", [Ints([2, 3], 0, 4)],
             lambda i: F.one_hot(i, 5).to(torch.float32), {"num_classes": 5},
             dtypes=("f32",), grad=False),
        Case("one_hot_i64", "one_hot", [Ints([4], 0, 2, dtype="i32")],
             lambda i: F.one_hot(i.long(), 3), {"num_classes": 3, "dtype": DT("i64")},
             dtypes=("i64",), grad=False),
        # Distinct values: torch leaves the order of ties unspecified.
        Case("topk", "topk", [Distinct([3, 6])], lambda x: torch.topk(x, 3, dim=-1),
             {"k": 3}, bf16=True),
        Case("topk_axis0", "topk", [Distinct([5, 2, 3])], lambda x: torch.topk(x, 2, dim=0),
             {"k": 2, "axis": 0}),
        Case("topk_all", "topk", [Distinct([2, 7])], lambda x: torch.topk(x, 7, dim=1),
             {"k": 7, "axis": 1}),
    ]


def rms_norm_ref(eps):
    return lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_ref(x, cos, sin):
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat([-x2, x1], -1) * sin


def cross_entropy_ref(ignore, reduction):
    def fn(logits, targets):
        v = logits.shape[-1]
        loss = F.cross_entropy(logits.reshape(-1, v), targets.reshape(-1).long(),
                               ignore_index=ignore, reduction=reduction)
        return loss.reshape(targets.shape) if reduction == "none" else loss
    return fn


def attention_ref(causal, scale, window=0):
    """Explicit math: GQA as HF's repeat_kv, the causal mask bottom-right
    aligned, a sliding window keeping the `window` most recent keys."""
    def fn(q, k, v):
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = q @ k.transpose(-2, -1) * scale
        sq, sk = q.shape[2], k.shape[2]
        if causal:
            i = torch.arange(sq).unsqueeze(1) + (sk - sq)
            j = torch.arange(sk)
            allowed = j <= i
            if window:
                allowed &= j > i - window
            scores = scores.masked_fill(~allowed, float("-inf"))
        return torch.softmax(scores, -1) @ v
    return fn


def compute_dtype(dtype):
    return "f64" if dtype == "f64" else "f32"


def model_cases():
    c = [
        Case("rms_norm", "rms_norm", [X([2, 3, 8], -2, 2), X([8], 0.5, 1.5)], rms_norm_ref(1e-6),
             {"eps": 1e-6}, bf16=True),
        Case("rms_norm_eps", "rms_norm", [X([4, 5], -0.1, 0.1), X([5])], rms_norm_ref(1e-2),
             {"eps": 1e-2}, bf16=True),
        Case("rope", "rope", [X([2, 5, 3, 8]), X([5, 8]), X([5, 8])], rope_ref, bf16=True),
        Case("rope_per_batch", "rope", [X([2, 4, 2, 6]), X([2, 4, 6]), X([2, 4, 6])], rope_ref),
    ]
    V = 7
    classes = list(range(V))
    for label, shape, ignore, red, b16 in [
        ("mean", [6], -100, "mean", True),
        ("sum_3d", [2, 3], -100, "sum", False),
        ("none", [2, 4], -100, "none", True),
        ("ignore_mean", [10], -100, "mean", True),
        ("ignore_custom", [3, 3], 2, "sum", False),
    ]:
        values = classes + ([ignore] * 3 if label.startswith("ignore") else [])
        c.append(Case(f"cross_entropy_{label}", "cross_entropy",
                      [X(shape + [V], -3, 3), Choice(shape, values)],
                      cross_entropy_ref(ignore, red), {"ignore_index": ignore, "reduction": red},
                      bf16=b16, out_dtype=compute_dtype))
    c.append(Case("cross_entropy_i32", "cross_entropy", [X([4, V], -3, 3),
                  Choice([4], classes, dtype="i32")], cross_entropy_ref(-100, "mean"),
                  out_dtype=compute_dtype))
    sdpa = F.scaled_dot_product_attention
    for label, b, hq, hkv, sq, sk, d, dv, causal, window, b16 in [
        ("plain", 2, 2, 2, 4, 6, 8, 8, False, 0, True),
        ("causal", 1, 2, 2, 5, 5, 8, 8, True, 0, True),
        ("causal_gqa", 2, 4, 2, 5, 5, 4, 4, True, 0, True),
        ("causal_kv_cache", 1, 3, 1, 3, 7, 4, 6, True, 0, False),
        ("window", 1, 2, 1, 8, 8, 4, 4, True, 3, True),
        ("window_kv_cache", 1, 2, 2, 4, 9, 4, 4, True, 2, False),
        ("mqa_vdim", 2, 3, 1, 4, 5, 6, 3, False, 0, False),
    ]:
        scale = 1.0 / d ** 0.5
        attrs = {"causal": causal, "scale": scale, "sliding_window": window}
        c.append(Case(f"attention_{label}", "scaled_dot_product_attention",
                      [X([b, hq, sq, d], -2, 2), X([b, hkv, sk, d], -2, 2), X([b, hkv, sk, dv])],
                      attention_ref(causal, scale, window), attrs, bf16=b16))
    # torch's own kernel, as a check on the explicit reference's conventions.
    c += [
        Case("attention_sdpa_causal_gqa", "scaled_dot_product_attention",
             [X([2, 4, 6, 8]), X([2, 2, 6, 8]), X([2, 2, 6, 8])],
             lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True),
             {"causal": True, "scale": 8 ** -0.5}, bf16=True),
        Case("attention_sdpa_scale", "scaled_dot_product_attention",
             [X([1, 2, 3, 4]), X([1, 2, 5, 4]), X([1, 2, 5, 4])],
             lambda q, k, v: sdpa(q, k, v, scale=0.3), {"scale": 0.3}),
    ]
    return c


def flash_ref(causal, scale, window=0):
    """attention_ref with documents (ids: query i sees key j only if their
    ids match) and the log-sum-exp of the masked scores as a second output."""
    def fn(q, k, v, *ids):
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = q @ k.transpose(-2, -1) * scale
        sq, sk = q.shape[2], k.shape[2]
        allowed = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            i = torch.arange(sq).unsqueeze(1) + (sk - sq)
            j = torch.arange(sk)
            allowed = j <= i
            if window:
                allowed &= j > i - window
        if ids:
            allowed = allowed & (ids[0].unsqueeze(-1) == ids[0].unsqueeze(-2)).unsqueeze(1)
        scores = scores.masked_fill(~allowed, float("-inf"))
        return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)
    return fn


def linear_ce_ref(ignore, reduction):
    def fn(h, w, targets):
        logits = h @ w.T
        loss = F.cross_entropy(logits, targets.long(), ignore_index=ignore, reduction=reduction)
        return loss, torch.logsumexp(logits, -1)
    return fn


def grouped_ref(transpose_w):
    def fn(x, w, sizes):
        out, start = [], 0
        for e, n in enumerate(sizes.tolist()):
            out.append(x[start:start + n] @ (w[e].T if transpose_w else w[e]))
            start += n
        return torch.cat(out, 0)
    return fn


def weight_grad_ref(a, b, sizes):
    out, start = [], 0
    for n in sizes.tolist():
        out.append(a[start:start + n].T @ b[start:start + n])
        start += n
    return torch.stack(out)


def fused_cases():
    """The fused ops of kiln/ops/fused_kernels.h (their backward ops are
    checked through the forward ops' gradients)."""
    c = []
    for label, b, hq, hkv, s, d, causal, window, docs in [
        ("plain", 2, 2, 2, 5, 8, False, 0, False),
        ("causal_gqa", 2, 4, 2, 6, 4, True, 0, False),
        ("window", 1, 2, 1, 9, 4, True, 3, False),
        ("docs_causal", 2, 2, 1, 8, 4, True, 0, True),
        ("docs_bidirectional", 1, 2, 2, 7, 4, False, 0, True),
        ("long_blocks", 1, 2, 1, 150, 8, True, 0, True),  # more than one 128-row block
    ]:
        scale = 1.0 / d ** 0.5
        ins = [X([b, hq, s, d], -2, 2), X([b, hkv, s, d], -2, 2), X([b, hkv, s, d])]
        if docs:
            ins.append(Ints([b, s], 0, 2))
        c.append(Case(f"flash_attention_{label}", "flash_attention", ins,
                      flash_ref(causal, scale, window),
                      {"causal": causal, "scale": scale, "sliding_window": window}))
    c.append(Case("flash_attention_kv_cache", "flash_attention",
                  [X([1, 2, 3, 4]), X([1, 2, 7, 4]), X([1, 2, 7, 6])],
                  flash_ref(True, 0.5), {"causal": True, "scale": 0.5}))
    for label, n, d, v, ignore, red, b16 in [
        ("mean", 6, 4, 7, -100, "mean", True),
        ("sum", 5, 3, 9, -100, "sum", False),
        ("none", 4, 4, 6, -100, "none", True),
        ("ignore_custom", 8, 3, 5, 2, "mean", False),
        ("two_tiles", 3, 4, 4100, -100, "mean", True),  # the CPU kernel's tiles are 4096 wide
    ]:
        classes = list(range(v))[:64] + ([ignore] * 3 if ignore == -100 and label == "mean" else [])
        c.append(Case(f"linear_cross_entropy_{label}", "linear_cross_entropy",
                      [X([n, d], -2, 2), X([v, d], -2, 2), Choice([n], classes)],
                      linear_ce_ref(ignore, red), {"ignore_index": ignore, "reduction": red},
                      bf16=b16, out_dtype=compute_dtype))
    for label, sizes, k, n, tw, b16 in [
        ("linear", [2, 0, 3, 1], 4, 5, True, True),
        ("kn", [1, 3, 0], 3, 4, False, False),
        ("one", [4], 2, 3, True, False),
    ]:
        e, t = len(sizes), sum(sizes)
        wshape = [e, n, k] if tw else [e, k, n]
        c.append(Case(f"grouped_matmul_{label}", "grouped_matmul",
                      [X([t, k]), X(wshape), Fixed(sizes)], grouped_ref(tw),
                      {"transpose_w": tw}, bf16=b16))
    c.append(Case("grouped_matmul_weight_grad", "grouped_matmul_weight_grad",
                  [X([6, 3]), X([6, 4]), Fixed([2, 0, 4], dtype="i32")], weight_grad_ref,
                  bf16=True))
    c += [
        Case("silu_mul", "silu_mul", [X([2, 3, 4], -5, 5), X([2, 3, 4])],
             lambda a, b: F.silu(a) * b, bf16=True),
        Case("silu_mul_strided", "silu_mul", [X([3, 4], -5, 5, transpose=True), X([3, 4])],
             lambda a, b: F.silu(a) * b),
    ]
    return c


# Registered ops without cases; the test fails on any other op that has none.
EXCLUDED = {
    "random_uniform": "kiln's Philox stream has no torch counterpart",
    "random_normal": "kiln's Philox stream has no torch counterpart",
    "bernoulli": "kiln's Philox stream has no torch counterpart",
    "all_reduce": "a collective: needs several ranks",
    "all_gather": "a collective: needs several ranks",
    "all_gather_cast": "a collective: needs several ranks (tests/dist/kernels_mpi_test)",
    "reduce_scatter": "a collective: needs several ranks",
    "all_to_all": "a collective: needs several ranks",
    "all_to_all_v": "a collective: needs several ranks (tests/dist/token_dispatch_mpi_test)",
    "broadcast": "a collective: needs several ranks",
    "reduce": "a collective: needs several ranks",
    "all_reduce_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "all_gather_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "all_gather_cast_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "reduce_scatter_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "all_to_all_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "broadcast_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "reduce_start": "a collective's async launch: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "collective_wait": "completes a *_start: only compiler passes emit it (tests/dist/collective_schedule_mpi_test)",
    "enter_parallel_region": "tensor parallelism's region entry: needs several ranks (tests/dist/data_parallel_test)",
    "leave_parallel_region": "tensor parallelism's region exit: needs several ranks (tests/dist/data_parallel_test)",
    "flash_attention_backward": "tested through the forward op's gradient",
    "linear_cross_entropy_backward": "tested through the forward op's gradient",
    "rms_norm_backward": "tested through the forward op's gradient",
    "rope_backward": "tested through the forward op's gradient",
    "silu_mul_backward": "tested through the forward op's gradient",
    "scan": "control flow: tests/autograd/scan_test checks it against the unrolled loop",
    "optimization_barrier": "the identity: tests/compiler/remat_test checks it and its gradient",
    "offload": "the identity into host memory: tests/compiler/remat_test checks it, its gradient and its pool",
    "reload": "the identity back to the device: tests/compiler/remat_test checks it and its gradient",
    "offload_start": "offload as a transfer: only activation offload emits it (tests/compiler/remat_test)",
    "reload_start": "reload as a transfer: only activation offload emits it (tests/compiler/remat_test)",
    "transfer_wait": "completes a transfer: only activation offload emits it (tests/compiler/remat_test)",
    "fused": "made by the compiler, not users: tests/compiler checks it against the ops it fuses",
}


def all_cases():
    return (unary_cases() + binary_cases() + view_cases() + creation_cases() + matmul_cases()
            + reduction_cases() + shape_cases() + indexing_cases() + model_cases()
            + fused_cases())


# --- Running cases and writing the file. -------------------------------------
def to_float(t, dtype):
    return t.to(dtype) if t.is_floating_point() else t


def run_case(case, dtype, tensors):
    cid = f"{case.name}.{dtype}"
    rng = np.random.default_rng(zlib.crc32(cid.encode()))
    distinct = list(rng.permutation(np.concatenate([np.arange(-128, 0), np.arange(1, 129)])))
    inputs = [make_input(s, dtype, rng, distinct) for s in case.inputs]
    ref_dt = REF_DTYPE[dtype]
    creation = not case.inputs  # ops without inputs make their own dtype

    def call(xs):
        out = case.fn(TORCH[dtype]) if creation else case.fn(*xs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    # The op at the case's dtype gives the output dtypes kiln must produce.
    out_dtypes = [case.out_dtype(dtype) if case.out_dtype else NAME[o.dtype]
                  for o in call(inputs)]
    ref_in = [to_float(x, ref_dt).detach() for x in inputs]
    wrt = [i for i, x in enumerate(inputs) if case.grad and x.is_floating_point()]
    for i in wrt:
        ref_in[i].requires_grad_(True)
    outs = call(ref_in)

    entry = {"name": cid, "op": case.op, "dtype": dtype, "attrs": encode_attrs(case.attrs, dtype),
             "inputs": [], "outputs": [], "grads": []}
    scale = case.tol_scale
    entry["tol"] = {k: v * scale for k, v in TOL.get(dtype, {"rtol": 0, "atol": 0}).items()}
    entry["grad_tol"] = {k: v * scale for k, v in GRAD_TOL.get(dtype, {}).items()}

    def put(name, t, as_dtype=None):
        t = t.detach()
        if as_dtype is not None:
            t = t.to(TORCH[as_dtype])
        tensors[name] = t.contiguous()
        return name

    for i, (s, x) in enumerate(zip(case.inputs, inputs)):
        stored = x.transpose(-2, -1) if s.transpose else x
        entry["inputs"].append({"name": put(f"{cid}/in{i}", stored), "transpose": s.transpose})
    cots = []
    for j, (o, odt) in enumerate(zip(outs, out_dtypes)):
        expect = put(f"{cid}/out{j}", o, "f64" if o.is_floating_point() else None)
        out = {"name": expect, "dtype": odt}
        if wrt:
            cot = torch.from_numpy(rng.uniform(-1, 1, list(o.shape))).to(TORCH[odt])
            out["cot"] = put(f"{cid}/cot{j}", cot)
            cots.append(to_float(cot, ref_dt))
        entry["outputs"].append(out)
    if wrt:
        loss = sum((o.to(ref_dt) * c).sum() for o, c in zip(outs, cots))
        grads = torch.autograd.grad(loss, [ref_in[i] for i in wrt])
        for i, g in zip(wrt, grads):
            entry["grads"].append({"input": i, "name": put(f"{cid}/grad{i}", g, "f64")})
    return entry


def tensor_bytes(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()  # little-endian hosts only, as safetensors is


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": SAFETENSORS[NAME[t.dtype]], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the safetensors file to write")
    args = p.parse_args()
    tensors, entries = {}, []
    for case in all_cases():
        for dtype in case.dtypes:
            entries.append(run_case(case, dtype, tensors))
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), "duplicate case names"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, tensors,
                      {"cases": json.dumps(entries), "excluded": json.dumps(EXCLUDED)})
    print(f"wrote {len(entries)} cases, {len(tensors)} tensors to {args.out}")


if __name__ == "__main__":
    main()
