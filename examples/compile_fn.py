"""kiln.compile on a function of your own: traced once per signature into
one optimised program (elementwise chains fused into single kernels), with
the same results as running it op by op.

    python examples/compile_fn.py          # prints the speed-up
    python examples/compile_fn.py --test   # checks the bits (the test suite)
"""
import argparse
import time

import numpy as np

import kiln


def block(x, w1, w2, scale):
    """An RMS-normed SwiGLU feed-forward with a residual."""
    h = x * kiln.rsqrt((x * x).mean(axes=[-1], keepdim=True) + 1e-6) * scale
    a, b = kiln.split(h @ w1, sizes=[w1.shape[1] // 2] * 2, axis=-1)
    return x + (kiln.silu(a) * b) @ w2


def timed(fn, args, repeat):
    fn(*args)
    kiln.wait_for_compiles()  # fused kernels build in the background, cached on disk
    kiln.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = fn(*args)
    kiln.synchronize()
    return out, (time.perf_counter() - t0) / repeat


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--test", action="store_true")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    n, d = (64, 32) if args.test else (args.tokens, args.dim)
    x, w1, w2, scale = (kiln.from_numpy(rng.standard_normal(s).astype(np.float32) * 0.1)
                        for s in [(n, d), (d, 8 * d), (4 * d, d), (d,)])
    args_ = (x, w1, w2, scale)
    compiled = kiln.compile(block)
    eager, t_eager = timed(block, args_, 3 if args.test else 20)
    fast, t_compiled = timed(compiled, args_, 3 if args.test else 20)
    assert np.array_equal(np.asarray(eager), np.asarray(fast)), "compiled != eager"
    assert compiled.num_signatures == 1
    print(f"compiled equals eager bit for bit; eager {t_eager * 1e3:.2f} ms, "
          f"compiled {t_compiled * 1e3:.2f} ms ({t_eager / t_compiled:.2f}x)")


if __name__ == "__main__":
    main()
