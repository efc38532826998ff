"""NumPy and DLPack, both ways, without copying: each test writes through
one side and reads through the other."""
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch

import kiln

NUMPY_DTYPES = [(np.float32, kiln.float32), (np.float64, kiln.float64),
                (np.float16, kiln.float16), (np.int32, kiln.int32), (np.int64, kiln.int64),
                (np.bool_, kiln.bool)]
TORCH_DTYPES = [(torch.float32, kiln.float32), (torch.float64, kiln.float64),
                (torch.bfloat16, kiln.bfloat16), (torch.float16, kiln.float16),
                (torch.int32, kiln.int32), (torch.int64, kiln.int64), (torch.bool, kiln.bool)]


def values(t):
    """A kiln tensor's values, read by kiln itself (tolist), not through a
    shared buffer."""
    return t.tolist()


# --- NumPy. --------------------------------------------------------------------
def test_numpy_write_is_seen_by_kiln():
    a = np.zeros((2, 3), np.float32)
    t = kiln.from_numpy(a)
    a[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
    kiln.synchronize()
    assert values(t) == [[0, 1, 2], [3, 4, 5]]
    assert values(t * 2.0) == [[0, 2, 4], [6, 8, 10]]


def test_kiln_write_is_seen_by_numpy_import():
    a = np.zeros((2, 3), np.float32)
    t = kiln.from_numpy(a)
    t.fill_(2.5)
    t[1, 2] = 7.0
    kiln.synchronize()
    assert a.tolist() == [[2.5, 2.5, 2.5], [2.5, 2.5, 7.0]]


def test_kiln_write_is_seen_by_numpy_export():
    t = kiln.zeros([2, 3])
    n = np.asarray(t)
    assert n.shape == (2, 3) and n.dtype == np.float32 and n.flags.writeable
    t.fill_(3.0)
    kiln.synchronize()
    assert (n == 3).all()
    n[0, 1] = -1.0  # and the other way
    assert values(t) == [[3, -1, 3], [3, 3, 3]]
    assert np.shares_memory(n, np.asarray(t))
    assert np.shares_memory(n, t.numpy())


def test_numpy_export_of_a_view_keeps_its_strides():
    base = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    n = np.asarray(base.T[1:, ::2])
    assert n.shape == (3, 2) and not n.flags.c_contiguous
    assert n.tolist() == [[1, 9], [2, 10], [3, 11]]
    n[0, 0] = 100.0
    assert values(base)[0][1] == 100.0


def test_numpy_copy_and_dtype_requests():
    t = kiln.ones([4])
    c = np.array(t)  # np.array copies by default
    assert not np.shares_memory(c, np.asarray(t))
    c[0] = 5
    assert values(t) == [1, 1, 1, 1]
    d = np.asarray(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == [1, 1, 1, 1]


def test_numpy_reads_pending_values():
    x = kiln.from_numpy(np.arange(4, dtype=np.float32))
    with kiln.eager_mode("defer_and_fuse"):
        y = (x * 2.0 + 1.0).exp()
        n = np.asarray(y)  # materializes and waits
    np.testing.assert_allclose(n, np.exp(np.arange(4) * 2.0 + 1.0), rtol=1e-6)


@pytest.mark.parametrize("np_dtype,kiln_dtype", NUMPY_DTYPES, ids=lambda d: str(d))
def test_numpy_dtype_round_trip(np_dtype, kiln_dtype):
    a = (np.arange(6) % 3 == 1) if np_dtype is np.bool_ else np.arange(-3, 3).astype(np_dtype)
    t = kiln.from_numpy(a)
    assert t.dtype == kiln_dtype and t.shape == (6,)
    assert values(t) == a.tolist()
    back = np.asarray(t)
    assert back.dtype == np_dtype and np.shares_memory(back, a)
    assert np.array_equal(back, a)


@pytest.mark.parametrize("name", [lambda np_t: np_t, lambda np_t: np.dtype(np_t),
                                  lambda np_t: np.dtype(np_t).name], ids=["type", "dtype", "name"])
def test_numpy_dtype_names(name):
    for np_dtype, kiln_dtype in NUMPY_DTYPES:
        assert kiln.zeros([2], name(np_dtype)).dtype == kiln_dtype
        assert kiln.ones([2]).to(name(np_dtype)).dtype == kiln_dtype
    for torch_dtype, kiln_dtype in TORCH_DTYPES:
        assert kiln.zeros([1], torch_dtype).dtype == kiln_dtype


def test_numpy_unsupported_dtype_is_an_error():
    with pytest.raises(kiln.Error, match="no kiln dtype"):
        kiln.from_numpy(np.zeros(3, np.uint16))


def test_numpy_has_no_bfloat16():
    t = kiln.zeros([2], kiln.bfloat16)
    with pytest.raises(kiln.Error, match="NumPy has no bfloat16.*to\\(kiln.float32\\)"):
        np.asarray(t)
    assert np.asarray(t.to(kiln.float32)).tolist() == [0.0, 0.0]


def test_from_dlpack_refuses_readonly_memory():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.raises(kiln.Error, match="read-only array.*pass a copy"):
        kiln.from_dlpack(a)


def test_readonly_reversed_and_byteswapped_arrays_are_copied():
    a = np.arange(4, dtype=np.float32)
    ro = a.view()
    ro.flags.writeable = False
    t = kiln.from_numpy(ro)
    a[0] = 9.0
    assert values(t) == [0, 1, 2, 3]
    r = kiln.from_numpy(a[::-1])
    assert values(r) == [3, 2, 1, 9]
    swapped = kiln.from_numpy(np.arange(3, dtype=">i8"))
    assert swapped.dtype == kiln.int64 and values(swapped) == [0, 1, 2]


def test_export_keeps_the_tensor_alive():
    t = kiln.full([1024, 256], 3.0)
    n = np.asarray(t)
    kiln.synchronize()
    held = kiln.memory_stats()["allocated"]
    del t
    gc.collect()
    # The buffer is still allocated, and not reused by new tensors.
    assert kiln.memory_stats()["allocated"] == held
    others = [kiln.full([1024, 256], 9.0) for _ in range(4)]
    kiln.synchronize()
    assert (n == 3.0).all()
    del others
    gc.collect()
    kiln.synchronize()
    before = kiln.memory_stats()["allocated"]
    del n
    gc.collect()
    kiln.synchronize()
    assert kiln.memory_stats()["allocated"] == before - 1024 * 256 * 4


def test_import_keeps_the_array_alive():
    a = np.arange(1000, dtype=np.float64)
    alive = weakref.ref(a)
    t = kiln.from_numpy(a)
    del a
    gc.collect()
    assert alive() is not None
    assert float(t.sum()) == 999 * 1000 / 2
    view = t[10:20]  # a view shares the storage, and so the array
    del t
    gc.collect()
    assert alive() is not None
    assert values(view) == list(range(10, 20))
    del view
    gc.collect()
    assert alive() is None


# --- DLPack (torch). -----------------------------------------------------------------
def test_torch_from_kiln_shares_memory():
    t = kiln.zeros([2, 3])
    p = torch.from_dlpack(t)
    assert p.shape == (2, 3) and p.dtype == torch.float32
    p[0, 1] = 7.0  # torch writes, kiln reads
    assert values(t) == [[0, 7, 0], [0, 0, 0]]
    t.fill_(1.5)  # kiln writes, torch reads
    kiln.synchronize()
    assert p.tolist() == [[1.5] * 3] * 2


def test_kiln_from_torch_shares_memory():
    p = torch.zeros(2, 3)
    t = kiln.from_dlpack(p)
    p[1, 2] = 4.0
    assert values(t) == [[0, 0, 0], [0, 0, 4]]
    t[0] = 2.0
    kiln.synchronize()
    assert p.tolist() == [[2, 2, 2], [0, 0, 4]]


def test_bfloat16_through_torch():
    p = torch.tensor([1.0, -2.5, 3.25], dtype=torch.bfloat16)
    t = kiln.from_dlpack(p)
    assert t.dtype == kiln.bfloat16
    assert values(t) == [1.0, -2.5, 3.25]
    t.fill_(0.5)
    kiln.synchronize()
    assert p.tolist() == [0.5] * 3
    q = torch.from_dlpack(kiln.full([2], -1.0, "bf16"))
    assert q.dtype == torch.bfloat16 and q.tolist() == [-1.0, -1.0]


@pytest.mark.parametrize("view", ["transposed", "sliced"])
def test_kiln_from_a_torch_view(view):
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    p = base.t() if view == "transposed" else base[1:3, ::2]
    t = kiln.from_dlpack(p)
    assert t.shape == tuple(p.shape) and not t.is_contiguous
    assert values(t) == p.tolist()
    assert values(t.contiguous()) == p.tolist()
    t.fill_(-1.0)  # writes only the view's elements of the base
    kiln.synchronize()
    expect = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    (expect.t() if view == "transposed" else expect[1:3, ::2]).fill_(-1.0)
    assert torch.equal(base, expect)
    p.add_(10.0)  # torch writes through the view, kiln reads
    assert values(t) == p.tolist()


def test_torch_from_a_kiln_view():
    t = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = t.T[::2]
    p = torch.from_dlpack(v)
    assert p.shape == (2, 3) and p.stride() == (2, 4)
    assert p.tolist() == [[0, 4, 8], [2, 6, 10]]
    p[1, 1] = -5.0
    assert values(t)[1][2] == -5.0


@pytest.mark.parametrize("torch_dtype,kiln_dtype", TORCH_DTYPES, ids=lambda d: str(d))
def test_dlpack_dtype_round_trip(torch_dtype, kiln_dtype):
    p = torch.tensor([0, 1, 0, 1]).to(torch_dtype) if torch_dtype == torch.bool else \
        torch.arange(-2, 2).to(torch_dtype)
    t = kiln.from_dlpack(p)
    assert t.dtype == kiln_dtype
    q = torch.from_dlpack(t)
    assert q.dtype == torch_dtype and q.data_ptr() == p.data_ptr()
    assert torch.equal(q, p)


def test_dlpack_export_keeps_the_tensor_alive():
    t = kiln.full([4096], 2.0)
    p = torch.from_dlpack(t)
    del t
    gc.collect()
    junk = [kiln.full([4096], 5.0) for _ in range(4)]
    kiln.synchronize()
    assert bool((p == 2.0).all())
    del junk


def test_dlpack_import_keeps_the_torch_memory_alive():
    # torch's capsule owns its storage (not the Python tensor object): the
    # memory must stay valid, and not be handed to new torch tensors.
    p = torch.arange(1 << 16, dtype=torch.float32)
    t = kiln.from_dlpack(p)
    del p
    gc.collect()
    junk = [torch.full((1 << 16,), -1.0) for _ in range(8)]
    assert values(t) == list(range(1 << 16))
    del junk


def test_no_deadlock_when_kiln_frees_imported_arrays():
    # Operators dispatch holding the GIL and wait while kiln's queue is full;
    # its worker, finishing the last op that read an imported array, must
    # not wait for the GIL to free it. Run apart: a deadlock hangs the process.
    code = """if True:
        import numpy as np, kiln
        acc = kiln.zeros([64])
        for _ in range(2000):
            acc = acc + kiln.from_numpy(np.ones(64, np.float32)) * 2.0
        assert acc.tolist() == [4000.0] * 64
        """
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=os.environ)
