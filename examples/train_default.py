"""Train kiln's default recipe from Python, watching each step.

    python examples/train_default.py                 # the full default run (200 steps)
    python examples/train_default.py --steps 50 --dump outputs/py_default

The trainer is the one `kiln train` runs (same flags, same losses); the
callback gets each step's metrics, and returning False stops the run after
its checkpoint is saved. --test: a short run in a temporary folder, checking
that the loss falls (how the test suite runs this example).
"""
import argparse
import tempfile

import kiln


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--dump", default="outputs/py_default", help="the run's folder")
    p.add_argument("--stop-below", type=float, default=0.0,
                   help="stop once the loss is below this")
    p.add_argument("--test", action="store_true")
    args = p.parse_args()

    history = []

    def on_step(m):
        history.append(m["loss"])
        if "tps" in m:  # logged steps carry the throughput
            print(f"step {m['step']:4d}  loss {m['loss']:.4f}  {m['tps']:.0f} tokens/s")
        return m["loss"] >= args.stop_below

    if args.test:
        with tempfile.TemporaryDirectory() as dump:
            kiln.train(callback=on_step, quiet=True, job={"dump_folder": dump},
                       training={"steps": 30}, metrics={"log_freq": 10},
                       checkpoint={"enable": False}, validation={"enable": False})
        assert history[-1] < history[0] - 0.5, f"the loss did not fall: {history}"
        print(f"loss {history[0]:.3f} -> {history[-1]:.3f} over {len(history)} steps")
        return
    result = kiln.train(callback=on_step, job={"dump_folder": args.dump},
                        training={"steps": args.steps})
    print(f"done: step {result['last_step']}, loss {result['last_loss']:.4f}, "
          f"outputs in {result['dump_folder']}")


if __name__ == "__main__":
    main()
