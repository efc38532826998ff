"""kiln's C++ errors surface as kiln.Error with their message; Python
exceptions raised inside traced functions come back as themselves."""
import pytest

import kiln


def test_error_is_an_exception():
    assert issubclass(kiln.Error, Exception)
    assert kiln.Error is kiln._kiln.Error
    with pytest.raises(Exception):
        kiln.zeros([2], "f33")


@pytest.mark.parametrize("make", [
    lambda: kiln.zeros([2], "f33"),
    lambda: kiln.ones([2]).to("f33"),
    lambda: kiln.ops.cast(kiln.ones([2]), dtype="f33"),
], ids=["factory", "to", "cast_attr"])
def test_bad_dtype_name(make):
    with pytest.raises(kiln.Error, match=r"unknown dtype 'f33'") as e:
        make()
    for name in ("f32", "bf16", "f16", "f64", "i32", "i64", "bool"):
        assert name in str(e.value), f"the message should list {name}: {e.value}"


@pytest.mark.parametrize("add", [lambda a, b: a + b, kiln.ops.add], ids=["operator", "op"])
def test_shape_mismatch_names_the_shapes(add):
    with pytest.raises(kiln.Error, match=r"\[2,3\] and \[4\] do not broadcast") as e:
        add(kiln.ones([2, 3]), kiln.ones([4]))
    assert "'add'" in str(e.value)


def test_unknown_attribute_is_named():
    with pytest.raises(kiln.Error,
                       match=r"op 'sum': unknown attribute 'axis' \(valid: axes, keepdim\)"):
        kiln.ops.sum(kiln.ones([2, 3]), axis=1)
    assert kiln.ops.sum(kiln.ones([2, 3]), axes=1).shape == (2,)  # an int is a one-element list


@pytest.mark.parametrize("call,message", [
    (lambda x: kiln.ops.sum(x, keepdim=1), r"sum: attribute 'keepdim' takes a bool, not 1"),
    (lambda x: kiln.ops.sum(x, axes="a"), r"'axes' takes a sequence of ints, not 'a'"),
    (lambda x: kiln.ops.sum(x, axes=[1.5]), r"'axes' takes a sequence of ints, not \[1.5\]"),
    (lambda x: kiln.ops.slice(x, axis=1.5, start=0, stop=1), r"'axis' takes an int, not 1.5"),
    (lambda x: kiln.ops.slice(x, axis=True, start=0, stop=1), r"'axis' takes an int, not True"),
    (lambda x: kiln.ops.gelu(x, tanh_approximation="yes"), r"'tanh_approximation' takes a bool"),
    (lambda x: kiln.ops.pad(x, pads=[0, 0, 0, 0], value="1"), r"'value' takes a number, not '1'"),
    (lambda x: kiln.ops.cross_entropy(x, x, reduction=1), r"'reduction' takes a str, not 1"),
], ids=["bool", "ints_str", "ints_float", "int_float", "int_bool", "bool_str", "float_str",
        "str_int"])
def test_wrong_attribute_type(call, message):
    with pytest.raises(kiln.Error, match=message):
        call(kiln.ones([2, 3]))


def test_missing_attribute_and_inputs():
    x = kiln.ones([2, 3])
    with pytest.raises(kiln.Error, match=r"missing required attribute 'eps'"):
        kiln.ops.rms_norm(x, kiln.ones([3]))
    with pytest.raises(kiln.Error, match=r"op 'add' takes 2 input\(s\), got 1"):
        kiln.ops.add(x)


def test_index_errors():
    x = kiln.ones([2, 3])
    with pytest.raises(IndexError, match="index 2 is out of range for dimension 0 of size 2"):
        x[2]
    with pytest.raises(kiln.Error, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(kiln.Error, match="unsupported index"):
        x["a"]
    assert len(list(x)) == 2  # iteration stops at the IndexError


def test_item_of_a_multi_element_tensor():
    with pytest.raises(kiln.Error, match="only a one-element tensor"):
        float(kiln.ones([2]))


class Boom(ValueError):
    pass


def raising(x):
    (x * 2.0).sum()
    raise Boom("from inside the traced function")


@pytest.mark.parametrize("transform", [kiln.value_and_grad, kiln.compile],
                         ids=["value_and_grad", "compile"])
def test_python_exception_propagates(transform):
    x = kiln.ones([3])
    f = transform(raising)
    for _ in range(2):  # and again: a failed trace leaves nothing behind
        with pytest.raises(Boom, match="from inside the traced function"):
            f(x)
    with pytest.raises(KeyError):
        transform(lambda x: {}["missing"])(x)
    # Kiln's own errors inside the function stay kiln.Error.
    with pytest.raises(kiln.Error, match="unknown attribute 'axis'"):
        transform(lambda x: kiln.ops.sum(x, axis=0))(x)
    # Everything works afterwards, in the same mode.
    assert kiln.get_eager_mode() == "strict"
    value, (grad,) = kiln.value_and_grad(lambda x: (x * x).sum())(x)
    assert float(value) == 3.0 and grad.tolist() == [2.0, 2.0, 2.0]


def test_value_and_grad_needs_a_scalar_loss():
    x = kiln.ones([2, 3])
    with pytest.raises(kiln.Error, match="first result must be a floating scalar"):
        kiln.value_and_grad(lambda a: a * 2.0)(x)
    with pytest.raises(kiln.Error, match="returned no tensors"):
        kiln.value_and_grad(lambda a: 3)(x)
