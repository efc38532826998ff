"""Writes kiln/ops.pyi from the op registry (run by the build):
python -m kiln._stubs OUT."""
import sys

from ._ops import build


def main(out):
    lines = ['"""kiln.ops: generated from the op registry by kiln._stubs."""',
             "from collections.abc import Sequence", "",
             "from ._kiln import Tensor, dtype", ""]
    for name, fn in sorted(build().items()):
        doc = fn.__doc__.replace('"""', "'''")
        lines += [f"def {name}{fn.__signature__}:", f'    """{doc}"""', ""]
    text = "\n".join(lines).replace("'Tensor | tuple[Tensor, ...]'", "Tensor | tuple[Tensor, ...]")
    for a in ("'Tensor'", "'int'", "'float'", "'bool'", "'str'", "'Sequence[int]'",
              "'dtype | str'", "'str | None'"):
        text = text.replace(a, a.strip("'"))
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
