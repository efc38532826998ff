"""Every op of kiln.ops against PyTorch, on the cases of tests/oracle/gen_ops.py
(the same cases, inputs, references and tolerances as the C++ oracle test,
computed here live): outputs, and for differentiable cases the gradients of
loss = sum(out * cot) through kiln.value_and_grad."""
import zlib

import numpy as np
import pytest
import torch

import gen_ops
import kiln
from conftest import assert_close, to_kiln, to_torch

CASES = {f"{c.name}.{dt}": (c, dt) for c in gen_ops.all_cases() for dt in c.dtypes}
FLOAT_DTYPES = {torch.float32, torch.float64, torch.bfloat16, torch.float16}


def kiln_attrs(attrs, dtype):
    """The case's attributes as keywords of kiln.ops: DT("$") is the case's
    dtype, other DTs their name (kiln takes its short names)."""
    return {k: (dtype if v.name == "$" else v.name) if isinstance(v, gen_ops.DT) else v
            for k, v in attrs.items()}


def draw(case, dtype):
    """The case's torch inputs and the rng, as gen_ops.run_case draws them
    (transposed inputs come back as non-contiguous views)."""
    rng = np.random.default_rng(zlib.crc32(f"{case.name}.{dtype}".encode()))
    distinct = list(rng.permutation(np.concatenate([np.arange(-128, 0), np.arange(1, 129)])))
    return [gen_ops.make_input(s, dtype, rng, distinct) for s in case.inputs], rng


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("cid", list(CASES))
def test_op_matches_torch(cid):
    case, dtype = CASES[cid]
    inputs, rng = draw(case, dtype)
    creation = not case.inputs
    torch_dt = gen_ops.TORCH[dtype]
    ref_dt = gen_ops.REF_DTYPE[dtype]

    def torch_call(xs):
        return as_list(case.fn(torch_dt) if creation else case.fn(*xs))

    out_dtypes = [case.out_dtype(dtype) if case.out_dtype else gen_ops.NAME[o.dtype]
                  for o in torch_call(inputs)]
    ref_in = [gen_ops.to_float(x, ref_dt).detach() for x in inputs]
    wrt = [i for i, x in enumerate(inputs) if case.grad and x.is_floating_point()]
    for i in wrt:
        ref_in[i].requires_grad_(True)
    refs = torch_call(ref_in)

    op = getattr(kiln.ops, case.op)
    attrs = kiln_attrs(case.attrs, dtype)
    k_in = [to_kiln(x) for x in inputs]
    for s, k in zip(case.inputs, k_in):
        if s.transpose:
            assert not k.is_contiguous, "kiln must see the transposed view, not a copy"
    outs = as_list(op(*k_in, **attrs))
    assert len(outs) == len(refs), f"{len(outs)} outputs, torch has {len(refs)}"

    scale = case.tol_scale
    tol = {k: v * scale for k, v in gen_ops.TOL.get(dtype, {"rtol": 0, "atol": 0}).items()}
    for j, (o, r, odt) in enumerate(zip(outs, refs, out_dtypes)):
        assert o.dtype.short_name == odt, f"output {j}: dtype {o.dtype.short_name}, want {odt}"
        got = to_torch(o)
        assert tuple(o.shape) == tuple(r.shape), f"output {j}: shape {o.shape} vs {tuple(r.shape)}"
        if got.dtype in FLOAT_DTYPES:
            assert_close(got, r.detach(), tol["rtol"], tol["atol"], f"{cid} output {j}")
        else:
            assert torch.equal(got, r.detach().to(got.dtype)), f"{cid} output {j}: {got} vs {r}"

    if not wrt:
        return
    # Cotangents drawn as gen_ops draws them (one per output, in its dtype).
    cots = [torch.from_numpy(rng.uniform(-1, 1, list(r.shape))).to(gen_ops.TORCH[odt])
            for r, odt in zip(refs, out_dtypes)]
    loss = sum((r.to(ref_dt) * gen_ops.to_float(c, ref_dt)).sum() for r, c in zip(refs, cots))
    want = torch.autograd.grad(loss, [ref_in[i] for i in wrt])

    cd = gen_ops.compute_dtype(dtype)  # the loss is summed in f64 or f32
    k_cots = [to_kiln(c).to(cd) for c in cots]

    def kiln_loss(*xs):
        total = None
        for o, c in zip(as_list(op(*xs, **attrs)), k_cots):
            if not o.dtype.is_floating_point:  # indices carry no gradient
                continue
            term = (o.to(cd) * c).sum()
            total = term if total is None else total + term
        return total

    _, grads = kiln.value_and_grad(kiln_loss)(*k_in)
    gtol = {k: v * scale for k, v in gen_ops.GRAD_TOL[dtype].items()}
    for i, g in enumerate(grads):
        if i not in wrt:
            assert g is None, f"input {i} ({k_in[i].dtype}) got a gradient"
            continue
        assert g is not None, f"no gradient for input {i}"
        assert g.dtype == k_in[i].dtype, f"gradient {i}: dtype {g.dtype}, input {k_in[i].dtype}"
        assert_close(to_torch(g), want[wrt.index(i)], gtol["rtol"], gtol["atol"],
                     f"{cid} gradient of input {i}")


def test_every_exposed_op_has_cases():
    covered = {c.op for c, _ in CASES.values()}
    missing = sorted(set(kiln.ops.__all__) - covered - set(gen_ops.EXCLUDED))
    assert not missing, f"kiln.ops without a case in gen_ops.py nor a reason in EXCLUDED: {missing}"
    registered = {d[0] for d in kiln._kiln.op_defs()}
    unknown = sorted((covered | set(gen_ops.EXCLUDED)) - registered)
    assert not unknown, f"gen_ops names ops kiln does not register: {unknown}"


def test_every_registered_op_is_exposed():
    hidden = [d[0] for d in kiln._kiln.op_defs()
              if d[0] not in kiln.ops.__all__
              and d[0] not in kiln._ops.COMPILER_ONLY and not d[0].endswith("_start")]
    assert not hidden, f"registered ops missing from kiln.ops: {hidden}"
    for name in kiln.ops.__all__:
        assert callable(getattr(kiln.ops, name))
        assert name in getattr(kiln.ops, name).__doc__


@pytest.mark.parametrize("name", sorted(set(gen_ops.EXCLUDED) & set(kiln.ops.__all__)))
def test_excluded_op(name):
    pytest.skip(f"{name}: {gen_ops.EXCLUDED[name]}")


# The random ops have no torch counterpart (EXCLUDED): their properties instead.
def test_random_ops_are_seeded_and_distributed():
    u = kiln.ops.random_uniform(shape=[20000], seed=3, low=-2.0, high=5.0)
    a = np.asarray(u)
    assert u.dtype == kiln.float32 and a.shape == (20000,)
    assert a.min() >= -2.0 and a.max() < 5.0 and abs(a.mean() - 1.5) < 0.05
    assert np.array_equal(a, np.asarray(kiln.ops.random_uniform(shape=[20000], seed=3, low=-2.0,
                                                                high=5.0)))
    assert not np.array_equal(a, np.asarray(kiln.ops.random_uniform(shape=[20000], seed=4,
                                                                    low=-2.0, high=5.0)))
    n = np.asarray(kiln.ops.random_normal(shape=[20000], seed=3, mean=1.0, std=2.0))
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    b = kiln.ops.bernoulli(shape=[20000], seed=3, p=0.3)
    assert b.dtype == kiln.bool and abs(np.asarray(b).mean() - 0.3) < 0.02
    assert kiln.ops.random_normal(shape=[2, 3], seed=0, dtype="bf16").dtype == kiln.bfloat16


def test_python_numbers_become_scalars():
    p = torch.tensor([1.5, -2.0, 3.0, -0.5])
    x = to_kiln(p)
    cond = to_kiln(p > 0)
    assert torch.equal(to_torch(kiln.ops.where(cond, x, 0.0)), torch.where(p > 0, p, 0.0))
    assert torch.equal(to_torch(kiln.ops.where(cond, -1, x)), torch.where(p > 0, -1.0, p))
    assert torch.equal(to_torch(kiln.ops.maximum(x, 0)), p.clamp(min=0))
    assert torch.equal(to_torch(kiln.ops.sub(2.0, x)), 2.0 - p)
    assert torch.equal(to_torch(kiln.ops.logical_and(cond, True)), p > 0)
    i = kiln.tensor([1, 2, 3])
    assert kiln.ops.mul(i, 3).dtype == kiln.int64 and kiln.ops.mul(i, 3).tolist() == [3, 6, 9]


INDEX_KEYS = [1, -1, (0, 2), (slice(None), 1), (slice(1, None, 2),), (Ellipsis, 0),
              (None,), (None, 1), (0, None, slice(1, 3)), (Ellipsis, None), (slice(5, 9),)]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=repr)
def test_tensor_indexing_matches_torch(key):
    p = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    view = to_kiln(p)[key]
    assert torch.equal(to_torch(view), p[key])
    view[...] = -1.0  # a view: writes land in the indexed tensor
    q = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    q[key] = -1.0
    kiln.synchronize()
    assert torch.equal(p, q)
