"""kiln: train Llama 3, Qwen3 and Qwen3-MoE models; tensors, autograd and a
fusing compiler, from Python.

    import kiln
    x = kiln.from_numpy(np.ones((2, 3), np.float32))
    loss, grads = kiln.value_and_grad(lambda x: (x * x).sum())(x)
    kiln.train("default", training={"steps": 20})
"""
from . import _kiln
from ._kiln import (Error, Generator, Tensor, Tokenizer, arange, bernoulli, dropout, dtype,
                    from_dlpack, full, memory_stats, normal, ones, pending_compiles, rand, randn,
                    scalar, stack, synchronize, uniform, wait_for_compiles, zeros)
from . import models, ops, optim
from .models import generate
from ._train import train, train_flags
from .transforms import compile, eager_mode, get_eager_mode, value_and_grad

float32, bfloat16, float16, float64 = dtype.float32, dtype.bfloat16, dtype.float16, dtype.float64
int32, int64, bool = dtype.int32, dtype.int64, dtype.bool

__version__ = "0.1.0"


def from_numpy(array):
    """A kiln tensor over a NumPy array's memory (no copy: writes through
    either are seen by the other once kiln's queued work has run,
    kiln.synchronize()). A read-only array, one with negative strides or
    one in the other byte order is copied (DLPack takes none of them)."""
    import numpy as np
    array = np.asarray(array)
    if (not array.flags.writeable or any(s < 0 for s in array.strides)
            or not array.dtype.isnative):
        array = np.array(array, dtype=array.dtype.newbyteorder("="))
    return from_dlpack(array)


def tensor(data, dtype=None):
    """A new tensor holding `data` (nested lists, numbers, a NumPy array),
    in `dtype` (default: float32 for floats, int64 for ints, bool)."""
    import numpy as np
    a = np.array(data)  # a new array, which the tensor keeps
    if a.dtype == np.float64 and dtype is None:
        a = a.astype(np.float32)
    t = from_dlpack(np.ascontiguousarray(a))
    return t if dtype is None else t.to(dtype)

# Every op is also a function of the package where it shadows nothing of
# kiln's own (and a method of Tensor: Tensor.__getattr__).
for _name in ops.__all__:
    if _name not in globals():
        globals()[_name] = getattr(ops, _name)
del _name
