"""kiln.train runs the trainer of `kiln train`: the same flags give the
same losses, bit for bit, and the step callback sees every step and can
stop the run."""
import json
import os
import subprocess

import pytest

import kiln

# The default recipe, 20 steps, every step logged, no files beyond metrics.
FLAGS = {"training": {"steps": 20}, "metrics": {"log_freq": 1, "enable_tensorboard": False,
                                                "progress_bar": False},
         "checkpoint": {"enable": False}, "validation": {"enable": False}}


def losses(dump):
    with open(os.path.join(dump, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f)]


def test_same_losses_as_the_cli(tmp_path):
    cli_dump, py_dump = str(tmp_path / "cli"), str(tmp_path / "py")
    subprocess.run([os.environ["KILN_CLI"], "train", f"--job.dump_folder={cli_dump}",
                    *kiln.train_flags(FLAGS)], check=True,
                   stdout=subprocess.DEVNULL)
    seen = []
    result = kiln.train(callback=lambda m: seen.append((m["step"], m["loss"])), quiet=True,
                        job={"dump_folder": py_dump}, **FLAGS)
    assert result["last_step"] == 20 and not result["stopped_by_callback"]
    expected = losses(cli_dump)
    assert len(expected) == 20
    assert losses(py_dump) == expected  # bit for bit: the same trainer
    assert seen == expected             # the callback saw every step's loss


def test_callback_stops_the_run_and_saves(tmp_path):
    dump = str(tmp_path / "run")
    flags = dict(FLAGS, checkpoint={"enable": True, "interval": 100})
    result = kiln.train(callback=lambda m: m["step"] < 3, quiet=True,
                        job={"dump_folder": dump}, **flags)
    assert result["stopped_by_callback"] and result["last_step"] == 3
    assert result["last_checkpoint"], "a stopped run saves its step"
    # Running again resumes from that checkpoint.
    again = kiln.train(quiet=True, job={"dump_folder": dump},
                       **dict(flags, training={"steps": 4}))
    assert again["start_step"] == 3 and again["last_step"] == 4


def test_recipe_as_a_dict(tmp_path):
    result = kiln.train({"config": "default", "training.steps": 2,
                         "job": {"dump_folder": str(tmp_path)}}, quiet=True,
                        **{k: v for k, v in FLAGS.items() if k != "training"})
    assert result["last_step"] == 2


def test_bad_setting_is_a_kiln_error(tmp_path):
    with pytest.raises(kiln.Error, match="no_such_key"):
        kiln.train(quiet=True, training={"no_such_key": 1}, job={"dump_folder": str(tmp_path)})


def test_callback_exception_propagates(tmp_path):
    def boom(m):
        raise ValueError("stop here")
    with pytest.raises(ValueError, match="stop here"):
        kiln.train(callback=boom, quiet=True, job={"dump_folder": str(tmp_path)}, **FLAGS)
