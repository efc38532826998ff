"""value_and_grad, compile and eager modes over Python functions of
tensors (and of lists, tuples and dicts of them)."""
import functools

from . import _kiln, _pytree


def value_and_grad(fn, argnums=None):
    """``vg = kiln.value_and_grad(fn); value, grads = vg(*args)``.

    fn's first result (or its only one) must be a floating scalar, the loss;
    further results ride along in ``value``, as fn returned them. ``grads``
    has the structure of the arguments (a dict of parameters gives a dict of
    gradients), None where an argument is an integer tensor or no tensor;
    with ``argnums`` (an int or a tuple of ints) only those arguments'.
    Keyword arguments are passed through, undifferentiated. The function is
    traced each call: inside it, values cannot be read."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        leaves, structure = _pytree.flatten([list(args), kwargs])
        out_structure = []

        def flat_fn(tensors):
            a, k = _pytree.unflatten(structure, tensors)
            out = fn(*a, **k)
            out_leaves, s = _pytree.flatten(out)
            out_structure.append(s)
            return out_leaves

        values, grads = _kiln.value_and_grad(flat_fn)(leaves)
        value = _pytree.unflatten(out_structure[-1], values)
        # None for everything that is no tensor.
        grads = _pytree.unflatten(
            _pytree.map_leaves(lambda n: n if n is _pytree.LEAF else None, structure), grads)[0]
        if argnums is None:
            return value, tuple(grads)
        if isinstance(argnums, int):
            return value, grads[argnums]
        return value, tuple(grads[i] for i in argnums)

    return wrapped


class compile:
    """``f = kiln.compile(fn)``: fn traced once per signature (the tensors'
    dtypes, shapes and devices, and the values of non-tensor arguments, which
    must be hashable: compared by equality, as JAX's static arguments) into
    one optimised program, which later calls run. Tensors fn reads from its
    closure are baked in as constants: pass what changes as arguments. On a
    method, the instance is such a static argument (each object its own
    programs, its tensors constants of them; kept alive as long as the
    compiled function).
    ``donate``: argument positions whose buffers the outputs may reuse
    (every tensor of a donated argument, which must not be used after the
    call). ``background``: the first call of a signature runs op by op
    while it compiles. ``replay``: the program's launches are recorded once
    per set of buffers and replayed (a CUDA graph on a GPU); small arguments
    are copied into the recording's buffers, donated and large ones (over
    1 MiB) are read in place. Set KILN_REPORT_RECOMPILES=1 to have each
    recompilation reported with what changed."""

    def __init__(self, fn, name=None, donate=(), background=False, replay=False):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._name = name or getattr(fn, "__qualname__", "compiled function")
        self._donate = tuple(donate)
        self._background = background
        self._replay = replay
        self._structure = {}  # static key -> the result's structure
        self._static_ids = {}  # static_form of the arguments -> its number
        # The C++ function donates tensors by their position in the flat
        # list, which depends on how many tensors each argument holds: one
        # per list of donated tensor positions.
        self._compiled = {}
        self._call_structure = None

    def _trace(self, tensors):
        args, kwargs = _pytree.unflatten(self._call_structure, tensors)
        out = self._fn(*args, **kwargs)
        leaves, s = _pytree.flatten(out)
        self._structure[self._static_key] = s
        return leaves

    def __call__(self, *args, **kwargs):
        # Keywords in name order: the same call however they were written.
        leaves, structure = _pytree.flatten([list(args), dict(sorted(kwargs.items()))])
        try:
            form = _pytree.static_form(structure)
        except TypeError as e:
            raise _kiln.Error(f"{self._name}: a non-tensor argument is not hashable ({e}); "
                              "compile keys its programs by the values of non-tensor "
                              "arguments: pass arrays as kiln tensors") from None
        static = str(self._static_ids.setdefault(form, len(self._static_ids)))
        self._call_structure = structure
        self._static_key = static + "|" + ";".join(
            f"{t.dtype.short_name}{t.shape}@{t.device}" for t in leaves)
        out = self._compiled_for(args)(leaves, static)
        return _pytree.unflatten(self._structure[self._static_key], out)

    def __get__(self, obj, objtype=None):
        """On a method: the method bound to obj (obj a static argument)."""
        return self if obj is None else functools.partial(self, obj)

    def _compiled_for(self, args):
        """The C++ function donating the tensors of the donated arguments."""
        missing = [i for i in self._donate if not 0 <= i < len(args)]
        if missing:
            raise _kiln.Error(f"{self._name}: donated argument {missing[0]} does not exist "
                              f"({len(args)} arguments)")
        donated, start = [], 0
        for i, arg in enumerate(args if self._donate else ()):
            n = len(_pytree.flatten(arg)[0])
            if i in self._donate:
                donated += range(start, start + n)
            start += n
        key = tuple(donated)
        if key not in self._compiled:
            self._compiled[key] = _kiln.CompiledFunction(self._trace, self._name, donated,
                                                         self._background, self._replay)
        return self._compiled[key]

    @property
    def num_signatures(self):
        """Programs compiled so far (one per signature)."""
        return sum(c.num_signatures for c in self._compiled.values())


def eager_mode(mode):
    """``with kiln.eager_mode("defer_and_fuse"):`` runs the block's ops in
    that mode: "strict" (asynchronous, op by op), "debug" (synchronous,
    NaN/Inf checks naming the op) or "defer_and_fuse" (ops recorded and run
    as fused compiled programs when a value is needed)."""
    return _kiln.EagerModeScope(mode)


get_eager_mode = _kiln.get_eager_mode
