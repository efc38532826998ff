"""kiln.train: the trainer of ``kiln train``, driven from Python."""
import os

from . import _kiln


def _flags(prefix, value):
    """("--section.key=value", ...) for a nested dict of settings."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _flags(f"{prefix}.{k}" if prefix else k, v)
        return out
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return [f"--{prefix}={value}"]


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
        args += _flags("", recipe)
    elif recipe is not None:
        args += ["--config", os.fspath(recipe)]
    args += _flags("", settings)
    return _kiln.train(args, callback, quiet)
