"""kiln.value_and_grad against torch.autograd; kiln.compile and the eager
modes against strict eager execution, bit for bit."""
import numpy as np
import pytest
import torch

import kiln
from conftest import assert_close, to_torch

RTOL, ATOL = 1e-5, 1e-6  # f32 against torch's f64


def mlp_data(seed=0):
    """f32 parameters (a dict), inputs and integer targets of a small MLP, as
    NumPy arrays."""
    rng = np.random.default_rng(seed)
    params = {"w1": rng.standard_normal((6, 8)) * 0.5, "b1": rng.standard_normal(8) * 0.1,
              "w2": rng.standard_normal((8, 5)) * 0.5}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x = rng.standard_normal((4, 6)).astype(np.float32)
    targets = rng.integers(0, 5, 4)
    return params, x, targets


def kiln_mlp(params, x, targets, scale):
    """loss = scale * cross_entropy(mlp(x), targets) + 0.01 |w2|^2, and the
    hidden activations as an aux result."""
    h = kiln.ops.silu(x @ params["w1"] + params["b1"])
    logits = (h @ params["w2"]).tanh() * 3.0
    decay = (params["w2"] * params["w2"]).sum() * 0.01
    loss = kiln.ops.cross_entropy(logits, targets) * scale + decay
    return loss, h


def torch_mlp(params, x, targets, scale):
    h = torch.nn.functional.silu(x @ params["w1"] + params["b1"])
    logits = (h @ params["w2"]).tanh() * 3.0
    decay = (params["w2"] ** 2).sum() * 0.01
    loss = torch.nn.functional.cross_entropy(logits, targets) * scale + decay
    return loss, h


def torch_reference(p, x, targets, scale):
    """(loss, h, {name: grad}, grad x) by torch in float64."""
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in p.items()}
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss, h = torch_mlp(tp, tx, torch.tensor(targets), scale)
    grads = torch.autograd.grad(loss, list(tp.values()) + [tx])
    return loss, h, dict(zip(tp, grads[:-1])), grads[-1]


def test_value_and_grad_matches_torch_with_dict_args():
    p, x, targets = mlp_data()
    loss, h, gp, gx = torch_reference(p, x, targets, 0.7)
    kp = {k: kiln.from_numpy(v) for k, v in p.items()}
    (k_loss, k_h), grads = kiln.value_and_grad(kiln_mlp)(kp, kiln.from_numpy(x),
                                                         kiln.from_numpy(targets), 0.7)
    assert_close(to_torch(k_loss), loss.detach(), RTOL, ATOL, "loss")
    assert_close(to_torch(k_h), h.detach(), RTOL, ATOL, "aux h")
    assert isinstance(grads, tuple) and len(grads) == 4
    assert isinstance(grads[0], dict) and list(grads[0]) == ["w1", "b1", "w2"]
    for name, g in grads[0].items():
        assert g.dtype == kiln.float32 and g.shape == kp[name].shape
        assert_close(to_torch(g), gp[name], 1e-4, 1e-5, f"grad {name}")
    assert_close(to_torch(grads[1]), gx, 1e-4, 1e-5, "grad x")
    assert grads[2] is None, "integer targets have no gradient"
    assert grads[3] is None, "a Python number has no gradient"


def test_value_and_grad_argnums():
    p, x, targets = mlp_data(1)
    _, _, gp, gx = torch_reference(p, x, targets, 1.0)
    kp = {k: kiln.from_numpy(v) for k, v in p.items()}
    args = (kp, kiln.from_numpy(x), kiln.from_numpy(targets), 1.0)
    (loss0, _), g0 = kiln.value_and_grad(kiln_mlp, argnums=0)(*args)
    assert isinstance(g0, dict) and set(g0) == {"w1", "b1", "w2"}
    for name in g0:
        assert_close(to_torch(g0[name]), gp[name], 1e-4, 1e-5, f"grad {name}")
    (loss1, _), g1 = kiln.value_and_grad(kiln_mlp, argnums=(1, 2))(*args)
    assert isinstance(g1, tuple) and len(g1) == 2 and g1[1] is None
    assert_close(to_torch(g1[0]), gx, 1e-4, 1e-5, "grad x")
    assert float(loss0) == float(loss1)


def test_value_and_grad_nested_lists_and_single_result():
    a = kiln.tensor([1.0, 2.0, 3.0])
    b = kiln.tensor([[0.5], [-1.0]])

    def f(pair):
        x, (y,) = pair
        return (x * y).exp().sum()

    loss, (grads,) = kiln.value_and_grad(f)([a, (b,)])
    ta = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    tb = torch.tensor([[0.5], [-1.0]], requires_grad=True)
    want = (ta * tb).exp().sum()
    ga, gb = torch.autograd.grad(want, [ta, tb])
    assert isinstance(grads, list) and isinstance(grads[1], tuple)
    assert_close(to_torch(loss), want.detach(), RTOL, ATOL, "loss")
    assert_close(to_torch(grads[0]), ga, RTOL, ATOL, "grad a")
    assert_close(to_torch(grads[1][0]), gb, RTOL, ATOL, "grad b")


def bits(t):
    return np.asarray(t.contiguous()).copy()


def assert_same_bits(a, b, what=""):
    a, b = bits(a), bits(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert a.tobytes() == b.tobytes(), f"{what}: bits differ: {a} vs {b}"


def fn_mixed(a, b, c):
    """matmul, exp, a reduction, softmax, broadcasting: what the compiler
    fuses and reorders."""
    m = (a @ b).exp() * 0.1
    s = kiln.ops.softmax(m + c, axis=-1)
    return {"sum": m.sum(axes=[1]), "soft": s, "lse": kiln.ops.logsumexp(s * 3.0 - m, axes=[0])}


def mixed_args(rows=5, seed=0):
    rng = np.random.default_rng(seed)
    return (kiln.from_numpy(rng.standard_normal((rows, 7)).astype(np.float32)),
            kiln.from_numpy(rng.standard_normal((7, 6)).astype(np.float32) * 0.3),
            kiln.from_numpy(rng.standard_normal(6).astype(np.float32)))


def test_compile_equals_eager_bit_for_bit():
    f = kiln.compile(fn_mixed)
    args = mixed_args()
    eager = fn_mixed(*args)
    compiled = f(*args)
    assert isinstance(compiled, dict) and list(compiled) == list(eager)
    for k in eager:
        assert_same_bits(compiled[k], eager[k], k)
    # The cached program, on new values of the same signature.
    args2 = mixed_args(seed=1)
    for k, v in f(*args2).items():
        assert_same_bits(v, fn_mixed(*args2)[k], k)
    assert f.num_signatures == 1


def test_compile_recompiles_only_for_new_signatures():
    traces = []

    def fn(x, k):
        traces.append(tuple(x.shape))
        return (x * k).exp().sum()

    f = kiln.compile(fn)
    x3, x4 = kiln.ones([3]), kiln.ones([4])
    assert float(f(x3, 2.0)) == pytest.approx(3 * np.exp(2.0))
    f(kiln.zeros([3]), 2.0)
    assert f.num_signatures == 1 and len(traces) == 1
    assert float(f(x4, 2.0)) == pytest.approx(4 * np.exp(2.0))
    assert f.num_signatures == 2
    f(x3, 2.0)
    f(x4, 2.0)
    assert f.num_signatures == 2 and len(traces) == 2
    # A non-tensor argument's value and a dtype are part of the signature.
    assert float(f(x3, 1.0)) == pytest.approx(3 * np.exp(1.0))
    assert f.num_signatures == 3
    assert f(kiln.ones([3], kiln.float64), 1.0).dtype == kiln.float64
    assert f.num_signatures == 4 and len(traces) == 4


def test_compile_donates_whole_arguments():
    """donate names arguments: every tensor of a donated dict may be reused,
    and no tensor of another argument."""
    def step(params, grads):
        return {k: params[k] - grads[k] * 0.5 for k in grads}

    f = kiln.compile(step, donate=(1,))
    params = {"a": kiln.full([1000], 7.0), "w": kiln.full([1000], 1.0)}
    grads = {"w": kiln.full([1000], 1.0)}
    new = f(params, grads)
    assert new["w"].tolist() == [0.5] * 1000
    assert params["w"].tolist() == [1.0] * 1000 and params["a"].tolist() == [7.0] * 1000
    # The donated gradient's buffer is reused: the output is written over it.
    assert grads["w"].tolist() == [0.5] * 1000
    assert f.num_signatures == 1
    with pytest.raises(kiln.Error, match="donated argument 2 does not exist"):
        kiln.compile(step, donate=(2,))(params, grads)


def test_compile_replay_gives_the_plain_bits():
    """replay=True: recorded once, replayed after; a new batch each call is
    copied in, the donated weights stay in place."""
    def step(w, x):
        return w - (x * w).sum() * 0.01

    plain, replayed = kiln.compile(step, donate=(0,)), kiln.compile(step, donate=(0,), replay=True)
    w_plain, w_replayed = kiln.full([64], 1.0), kiln.full([64], 1.0)
    for i in range(5):
        x = kiln.full([64], 0.1 * (i + 1))
        w_plain, w_replayed = plain(w_plain, x), replayed(w_replayed, x)
        assert w_replayed.tolist() == w_plain.tolist()


def test_compile_signature_tells_non_tensor_arguments_apart():
    f = kiln.compile(lambda x, a: x * float(a))
    # Equal values share a program; 1 and 1.0 do not (their types differ).
    assert f(kiln.ones([1]), 2).tolist() == [2.0]
    assert f(kiln.ones([1]), 3).tolist() == [3.0]
    assert f(kiln.ones([1]), 2).tolist() == [2.0] and f.num_signatures == 2
    assert f(kiln.ones([1]), 2.0).tolist() == [2.0] and f.num_signatures == 3
    # A NumPy array is no static argument: repr() would abbreviate it, and
    # equality is elementwise.
    with pytest.raises(kiln.Error, match="not hashable"):
        f(kiln.ones([1]), np.zeros(2000))


def test_compile_of_a_method():
    class Scaled:
        def __init__(self, w):
            self.w = w

        @kiln.compile
        def __call__(self, x):
            return x * self.w

    a, b = Scaled(kiln.full([2], 2.0)), Scaled(kiln.full([2], 3.0))
    x = kiln.ones([2])
    assert a(x).tolist() == [2.0, 2.0]
    assert b(x).tolist() == [3.0, 3.0]  # each object its own program
    assert a(x).tolist() == [2.0, 2.0]


def test_compile_of_value_and_grad():
    p, x, targets = mlp_data(2)
    kp = {k: kiln.from_numpy(v) for k, v in p.items()}
    args = (kp, kiln.from_numpy(x), kiln.from_numpy(targets), 0.5)
    vg = kiln.value_and_grad(kiln_mlp, argnums=0)

    def step(params, x, targets, scale):
        (loss, _), grads = vg(params, x, targets, scale)
        return loss, grads

    f = kiln.compile(step)
    loss, grads = f(*args)
    e_loss, e_grads = step(*args)
    assert_same_bits(loss, e_loss, "loss")
    assert set(grads) == set(e_grads)
    for k in grads:
        assert_same_bits(grads[k], e_grads[k], f"grad {k}")
    _, _, gp, _ = torch_reference(p, x, targets, 0.5)
    for k in grads:
        assert_close(to_torch(grads[k]), gp[k], 1e-4, 1e-5, f"grad {k}")


def test_defer_and_fuse_equals_strict():
    args = mixed_args(seed=3)
    strict = fn_mixed(*args)
    p, x, targets = mlp_data(3)
    kp = {k: kiln.from_numpy(v) for k, v in p.items()}
    vg_args = (kp, kiln.from_numpy(x), kiln.from_numpy(targets), 1.0)
    (s_loss, s_h), s_grads = kiln.value_and_grad(kiln_mlp)(*vg_args)
    with kiln.eager_mode("defer_and_fuse"):
        fused = fn_mixed(*args)
        (f_loss, f_h), f_grads = kiln.value_and_grad(kiln_mlp)(*vg_args)
        assert not fused["soft"].is_materialized, "defer_and_fuse ran an op eagerly"
        for k in strict:
            assert_same_bits(fused[k], strict[k], k)
    assert_same_bits(f_loss, s_loss, "loss")
    assert_same_bits(f_h, s_h, "h")
    for k in s_grads[0]:
        assert_same_bits(f_grads[0][k], s_grads[0][k], f"grad {k}")
    assert_same_bits(f_grads[1], s_grads[1], "grad x")


def test_get_eager_mode():
    assert kiln.get_eager_mode() == "strict"
    with kiln.eager_mode("defer_and_fuse"):
        assert kiln.get_eager_mode() == "defer_and_fuse"
        with kiln.eager_mode("debug"):
            assert kiln.get_eager_mode() == "debug"
        assert kiln.get_eager_mode() == "defer_and_fuse"
    assert kiln.get_eager_mode() == "strict"
    with pytest.raises(ZeroDivisionError):
        with kiln.eager_mode("debug"):
            1 / 0
    assert kiln.get_eager_mode() == "strict"


def test_eager_mode_bad_name():
    with pytest.raises(kiln.Error,
                       match="unknown eager mode 'fast'.*strict, debug or defer_and_fuse"):
        kiln.eager_mode("fast")
    assert kiln.get_eager_mode() == "strict"


def test_debug_mode_names_the_op_making_nan():
    x = kiln.tensor([1.0, -1.0])
    with pytest.raises(kiln.Error, match="sqrt"):
        with kiln.eager_mode("debug"):
            kiln.ops.sqrt(x)
    assert np.isnan(np.asarray(kiln.ops.sqrt(x))[1])  # strict mode computes it


def test_keyword_arguments():
    x, w = kiln.full([3], 2.0), kiln.full([3], 5.0)

    def f(x, *, w, scale=1.0):
        return (x * w).sum() * scale

    value, (gx,) = kiln.value_and_grad(f)(x, w=w, scale=3.0)
    assert float(value) == 90.0 and gx.tolist() == [15.0, 15.0, 15.0]
    c = kiln.compile(f)
    assert float(c(x, w=w, scale=3.0)) == 90.0
    assert float(c(x, scale=3.0, w=w)) == 90.0 and c.num_signatures == 1
    assert float(c(x, w=w)) == 30.0 and c.num_signatures == 2
