"""kiln.Generator and the draws over it (rand, randn, uniform, normal,
bernoulli, dropout), and stack: reproducible from the seed, distributed as
stated, and dropout's gradient through the same mask."""
import numpy as np
import torch

import kiln

N = 20000


def draws(seed):
    g = kiln.Generator(seed)
    return [np.asarray(t) for t in (kiln.rand([N], g), kiln.randn([N], g),
                                    kiln.uniform([N], -2.0, 5.0, g),
                                    kiln.normal([N], 3.0, 0.5, g, dtype="f64"),
                                    kiln.bernoulli([N], 0.25, g))]


def test_a_seed_gives_the_same_stream():
    a, b, c = draws(7), draws(7), draws(8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not any(np.array_equal(x, y) for x, y in zip(a[:4], c[:4]))
    # Each draw reserves its counters: two draws of one generator differ.
    g = kiln.Generator(7)
    first = np.asarray(kiln.rand([N], g))
    assert g.offset > 0 and not np.array_equal(first, np.asarray(kiln.rand([N], g)))


def test_distributions():
    r, n, u, nm, b = draws(1)
    assert r.dtype == np.float32 and 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.01
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    assert -2 <= u.min() and u.max() < 5 and abs(u.mean() - 1.5) < 0.06
    assert nm.dtype == np.float64 and abs(nm.mean() - 3) < 0.015 and abs(nm.std() - 0.5) < 0.015
    assert b.dtype == np.bool_ and abs(b.mean() - 0.25) < 0.01


def test_dropout_scales_kept_elements_and_its_gradient_uses_the_mask():
    x = kiln.from_numpy(np.linspace(1, 2, N, dtype=np.float32))
    y = np.asarray(kiln.dropout(x, 0.3, kiln.Generator(5)))
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y[kept], np.asarray(x)[kept] / 0.7, rtol=1e-6)
    _, (grad,) = kiln.value_and_grad(lambda x: kiln.dropout(x, 0.3, kiln.Generator(5)).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), kept / 0.7, rtol=1e-6)


def test_stack_matches_torch():
    parts = [np.random.default_rng(i).standard_normal((3, 4)).astype(np.float32) for i in range(3)]
    got = np.asarray(kiln.stack([kiln.from_numpy(p) for p in parts]))
    assert np.array_equal(got, torch.stack([torch.from_numpy(p) for p in parts]).numpy())
