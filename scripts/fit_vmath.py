#!/usr/bin/env python3
"""Fits the polynomial coefficients of kiln/codegen/vmath.h.

Each polynomial is a near-minimax fit (Lawson's iteratively reweighted least
squares) of the part of the function that the code approximates, weighted by
how its error reaches the final result; targets come from mpmath at 50
digits. Prints the coefficients, highest power first (Horner order), as f32
literals. The bounds that matter are measured on the f32 code itself:
tests/backend/vmath_test.cc.

    .venv/bin/python scripts/fit_vmath.py
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 50


def fit(target, scale, lo, hi, degree, centre=0.0, points=4000, rounds=60):
    """Coefficients c[0..degree] of sum c[k] (t - centre)^k ~ target(t) on [lo, hi],
    minimising max |scale(t) * (p(t) - target(t))|."""
    k = np.arange(points)
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / points)
    g = np.array([float(target(mp.mpf(x))) for x in t])
    s = np.array([float(scale(mp.mpf(x))) for x in t])
    a = np.vander(t - centre, degree + 1, increasing=True) * s[:, None]
    b = g * s
    w = np.ones(points) / points
    for _ in range(rounds):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    return c, err.max()


def show(name, c, err):
    lits = ", ".join(f"{np.float32(v)!r}f".replace("np.float32(", "").replace(")", "")
                     for v in c[::-1])
    print(f"{name}: max weighted error {err:.3g}\n  {{{lits}}}")


# log(1 + f) = f - f^2/2 + f^3 Q(f), f in [sqrt(1/2) - 1, sqrt(2) - 1].
def log_q(f):
    return (mp.log1p(f) - f + f * f / 2) / f**3 if f != 0 else mp.mpf(1) / 3


show("log Q(f)", *fit(log_q, lambda f: f**3 / mp.log1p(f) if f != 0 else 0,
                      float(mp.sqrt(0.5) - 1), float(mp.sqrt(2) - 1), 7))


# tanh(x) = x + x^3 P(x^2) for |x| < 0.625; the error scales as x^2.
def tanh_p(z):
    x = mp.sqrt(z)
    return (mp.tanh(x) - x) / x**3 if z != 0 else -mp.mpf(1) / 3


show("tanh P(z)", *fit(tanh_p, lambda z: z, 0.0, 0.625**2, 4))


# erf(x) = x + x P(x^2) for |x| < 1.
def erf_p(z):
    x = mp.sqrt(z)
    return mp.erf(x) / x - 1 if z != 0 else 2 / mp.sqrt(mp.pi) - 1


show("erf P(z)", *fit(erf_p, lambda z: 1, 0.0, 1.0, 6))

# erf(x) = 1 - exp(R(x - 1)) for 1 <= x <= 4, R ~ log(erfc(x)); an error in R
# moves erf by erfc(x) / erf(x) relative, most at x = 1, where R(0) is a
# constant (no cancellation in the polynomial).
show("erf R(x)", *fit(lambda x: mp.log(mp.erfc(x)), lambda x: mp.erfc(x) / mp.erf(x),
                      1.0, 4.0, 7, centre=1.0))
