"""kiln.train: the trainer of ``kiln train``, driven from Python."""
import os

from . import _kiln


def train_flags(settings, prefix=""):
    """``kiln train``'s flags for a dict of settings, nested by section
    ({"training": {"steps": 20}}) or dotted ({"training.steps": 20}):
    ["--training.steps=20"]."""
    out = []
    for k, v in settings.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out += train_flags(v, key)
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        out.append(f"--{key}={v}")
    return out


def train(recipe=None, callback=None, *, quiet=False, **settings):
    """Runs the trainer of ``kiln train`` and returns its result (a dict:
    last_step, last_loss, stopped_by_callback, last_checkpoint, ...).

    recipe: a recipe file or name (default: kiln's default recipe), or a dict
    of settings ({"training": {"steps": 20}}, or {"training.steps": 20});
    a dict may name its base recipe as "config". settings: more of them as
    keywords, a dict per section (training={"steps": 20, "seq_len": 64}).
    callback(metrics): after each step, with its step, loss, grad_norm, lr
    (and tps, tflops, mfu, mem_peak_bytes at logged steps); returning False
    stops the run after saving its checkpoint (when checkpointing is on)."""
    args = []
    if isinstance(recipe, dict):
        recipe = dict(recipe)
        base = recipe.pop("config", None)
        if base is not None:
            args += ["--config", os.fspath(base)]
        args += train_flags(recipe)
    elif recipe is not None:
        args += ["--config", os.fspath(recipe)]
    args += train_flags(settings)
    return _kiln.train(args, callback, quiet)
