"""Shared setup of kiln's Python tests: tests/oracle on sys.path (gen_ops's
cases), and the conversions between kiln and torch."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "oracle"))

import kiln  # noqa: E402


def to_torch(t):
    """A kiln tensor's values as a new torch tensor (through DLPack, then
    copied, so that the result outlives nothing of kiln's)."""
    return torch.from_dlpack(t).clone()


def to_kiln(t):
    """A torch tensor as a kiln tensor over the same memory."""
    return kiln.from_dlpack(t.detach())


def assert_close(got, want, rtol, atol, what=""):
    """|got - want| <= atol + rtol * |want| elementwise, in float64 (NaNs
    must be in the same places)."""
    got, want = got.double(), want.double()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan), f"{what}: NaNs differ"
    err = (got - want).abs().masked_fill(nan, 0)
    bound = atol + rtol * want.abs().masked_fill(nan, 0)
    bad = err > bound
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.numel()} elements off; max error "
                    f"{err.max().item():.3e}; first at flat index {i}: "
                    f"{got.flatten()[i].item()!r} vs {want.flatten()[i].item()!r}")
