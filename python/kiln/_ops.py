"""kiln.ops, made from the op registry: one function per op, taking the
op's inputs as positional arguments and its attributes as keywords, with the
schema's defaults. Nothing here names an op, so a new C++ op appears here
without a binding edit."""
import inspect

from . import _kiln
from ._kiln import Tensor

# Registered ops that only compiler passes make; calling them by hand has
# no meaning (tests/python/test_ops.py checks every other op is exposed).
COMPILER_ONLY = {
    "fused": "a fusion group the compiler forms from other ops",
    "scan": "control flow: kiln's scan over layers builds it (kiln/autograd/scan.h)",
    "collective_wait": "completes a *_start, which the collective scheduler emits",
    "transfer_wait": "completes an offload_start or reload_start, which activation offload emits",
}


def _compiler_only(name):
    return name in COMPILER_ONLY or name.endswith("_start")


def _signature(num_inputs, attrs):
    params = []
    if num_inputs < 0:
        params.append(inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL,
                                        annotation="Tensor"))
    else:
        names = ["x"] if num_inputs == 1 else [f"x{i}" for i in range(num_inputs)]
        params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY, annotation="Tensor")
                   for n in names]
    for name, kind, default, required in attrs:
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=ANNOTATION[kind],
            default=inspect.Parameter.empty if required else default))
    if num_inputs == 0:
        params.append(inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY,
                                        annotation="str | None", default=None))
    return inspect.Signature(params, return_annotation="Tensor | tuple[Tensor, ...]")


ANNOTATION = {"int": "int", "float": "float", "bool": "bool", "string": "str",
              "int list": "Sequence[int]", "dtype": "dtype | str"}


def _doc(name, num_inputs, attrs, differentiable, fusion):
    inputs = "any number of" if num_inputs < 0 else str(num_inputs)
    lines = [f"kiln op `{name}`: {inputs} tensor input(s); {fusion}"
             f"{'; differentiable' if differentiable else ''}."]
    for a, kind, default, required in attrs:
        lines.append(f"  {a}: {kind}" + (" (required)" if required else f" = {default!r}"))
    return "\n".join(lines)


def _make(name, num_inputs, attrs, differentiable, fusion):
    def op(*inputs, device=None, **kwargs):
        if all(isinstance(x, Tensor) for x in inputs):
            return _kiln.apply(name, inputs, kwargs, device)
        # A Python number becomes a 0-d tensor of the first tensor input's
        # dtype, as in the C++ operators; a bool input (where's condition)
        # gives way to the next, so that where(cond, x, 0.0) takes x's.
        tensors = [x for x in inputs if isinstance(x, Tensor)]
        like = next((x for x in tensors if x.dtype != _kiln.dtype.bool),
                    tensors[0] if tensors else None)
        args = [x if isinstance(x, Tensor) or like is None
                else _kiln.scalar(x, like.dtype, like.device) for x in inputs]
        return _kiln.apply(name, args, kwargs, device)

    op.__name__ = op.__qualname__ = name
    op.__signature__ = _signature(num_inputs, attrs)
    op.__doc__ = _doc(name, num_inputs, attrs, differentiable, fusion)
    return op


def build():
    """{name: function} for every op users may call."""
    return {name: _make(name, n, attrs, diff, fusion)
            for name, n, attrs, diff, fusion, _ in _kiln.op_defs() if not _compiler_only(name)}
