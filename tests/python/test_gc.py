"""Reference cycles through kiln's transforms are collected: a transform
holds its Python function in C++, and Python's garbage collector must see
that reference (tp_traverse) and be able to break it (tp_clear), or every
object on the cycle, tensors included, leaks."""
import gc
import tracemalloc
import weakref

import kiln

ROUNDS = 25
SIZE = [128, 256]  # 128 KiB of f32 per object, so that a leak shows in kiln's allocator


def allocated():
    gc.collect()
    kiln.synchronize()
    return kiln.memory_stats()["allocated"]


class Model:
    """self -> compiled -> bound method -> self."""

    def __init__(self):
        self.w = kiln.full(SIZE, 0.5)
        self.forward = kiln.compile(self._forward)

    def _forward(self, x):
        return (x @ self.w).exp().sum()


class Closure:
    """A weakly referenceable stand-in for a closure's cell contents."""


def compiled_method():
    m = Model()
    assert float(m.forward(kiln.zeros([2, SIZE[0]]))) == 2 * SIZE[1]
    return m


def compiled_closure():
    """A function that refers to its own compiled self."""
    box = Closure()
    box.w = kiln.full(SIZE, 1.0)

    def fn(x):
        assert box.f.num_signatures <= 1
        return (x @ box.w).sum()

    box.f = kiln.compile(fn)
    box.f(kiln.ones([1, SIZE[0]]))
    return box


def value_and_grad_closure(raw):
    """A loss that refers to its own value_and_grad (the package's wrapper,
    or kiln._kiln's C++ object directly)."""
    box = Closure()
    box.w = kiln.full(SIZE, 1.0)

    def loss(*args):
        xs = args[0] if raw else args
        assert box.vg is not None
        return (xs[0] * box.w).sum()

    box.vg = kiln._kiln.value_and_grad(loss) if raw else kiln.value_and_grad(loss)
    x = kiln.ones(SIZE)
    _, grads = box.vg([x]) if raw else box.vg(x)
    assert grads[0].tolist()[0][0] == 1.0
    return box


MAKERS = {
    "compiled_method": compiled_method,
    "compiled_closure": compiled_closure,
    "value_and_grad_closure": lambda: value_and_grad_closure(False),
    "raw_value_and_grad_closure": lambda: value_and_grad_closure(True),
}


def check_collected(make):
    make()  # the first round may fill caches kiln keeps
    before = allocated()
    alive = []
    for _ in range(ROUNDS):
        obj = make()
        alive.append(weakref.ref(obj))
        del obj
    after = allocated()
    assert sum(r() is not None for r in alive) == 0, "objects on a cycle were not collected"
    assert after <= before, f"kiln's allocated memory grew by {after - before} bytes"


def test_compiled_bound_method_cycle():
    check_collected(MAKERS["compiled_method"])


def test_compiled_closure_cycle():
    check_collected(MAKERS["compiled_closure"])


def test_value_and_grad_closure_cycle():
    check_collected(MAKERS["value_and_grad_closure"])


def test_raw_value_and_grad_closure_cycle():
    check_collected(MAKERS["raw_value_and_grad_closure"])


def test_python_memory_stays_flat():
    for make in MAKERS.values():  # warm every path
        make()
    gc.collect()
    tracemalloc.start()
    try:
        for make in MAKERS.values():
            make()
        gc.collect()
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(ROUNDS):
            for make in MAKERS.values():
                make()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # A leaked object graph costs several KiB per round; allow noise.
    assert grown < 16 * 1024, f"Python memory grew by {grown} bytes over {ROUNDS} rounds"


def test_collected_while_gc_disabled_then_enabled():
    gc.disable()
    try:
        box = compiled_closure()
        ref = weakref.ref(box)
        del box
        assert ref() is not None  # a cycle: only the collector frees it
    finally:
        gc.enable()
    gc.collect()
    assert ref() is None
