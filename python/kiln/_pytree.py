"""Nested containers of tensors (pytrees): lists, tuples and dicts of
tensors, numbers and None, flattened to a list of tensors and a structure
that rebuilds them. How value_and_grad and compile take a model's parameter
dict or a (loss, aux) tuple."""
from ._kiln import Tensor


class Leaf:
    """Where a tensor goes back in."""

    __slots__ = ()

    def __repr__(self):
        return "*"


LEAF = Leaf()


def map_leaves(fn, tree):
    """The tree with every value that is no list, tuple or dict replaced by
    fn(value), depth first."""
    if isinstance(tree, dict):
        return {k: map_leaves(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        items = [map_leaves(fn, v) for v in tree]
        return items if isinstance(tree, list) else tuple(items)
    return fn(tree)


def flatten(tree):
    """(tensors, structure): the tensors depth first, and the tree with a
    LEAF in each tensor's place (everything else kept as it is)."""
    leaves = []

    def take(node):
        if not isinstance(node, Tensor):
            return node
        leaves.append(node)
        return LEAF

    return leaves, map_leaves(take, tree)


def unflatten(structure, leaves):
    """The tree `structure` with its LEAFs replaced by `leaves`, in order."""
    it = iter(leaves)
    return map_leaves(lambda node: next(it) if node is LEAF else node, structure)


def static_form(structure):
    """A hashable value equal for two structures exactly when they hold the
    same containers and equal non-tensor values of the same types (1, 1.0
    and True differ). A value that cannot be hashed (a NumPy array) raises
    TypeError: pass it as a tensor."""
    if structure is LEAF:
        return LEAF
    if isinstance(structure, dict):
        return ("dict", tuple((k, static_form(v)) for k, v in structure.items()))
    if isinstance(structure, (list, tuple)):
        return (type(structure).__name__, tuple(static_form(v) for v in structure))
    hash(structure)
    return (type(structure), structure)
