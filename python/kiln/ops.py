"""Every op of kiln's registry, as functions: ``kiln.ops.matmul(a, b)``,
``kiln.ops.sum(x, axes=[1], keepdim=True)``. Inputs are positional tensors
(a Python number becomes a scalar of the first non-bool tensor's dtype),
attributes are keywords; ``help(kiln.ops.<name>)`` shows an op's schema."""
from ._ops import COMPILER_ONLY, build

_table = build()
globals().update(_table)
__all__ = sorted(_table)
