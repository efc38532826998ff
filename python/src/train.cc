// kiln.train: the trainer of `kiln train`, from the same arguments, with a
// Python callback after each step.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <iostream>

#include "kiln/train/config.h"
#include "kiln/train/trainer.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

nb::dict metrics_dict(const train::StepMetrics& m) {
  nb::dict d;
  d["step"] = m.step;
  d["loss"] = m.loss;
  d["grad_norm"] = m.grad_norm;
  d["lr"] = m.lr;
  if (m.tps > 0) {  // filled at logged steps
    d["tps"] = m.tps;
    d["tflops"] = m.tflops;
    d["mem_peak_bytes"] = m.mem_peak_bytes;
    if (m.mfu) d["mfu"] = *m.mfu;
  }
  if (m.val_loss) d["val_loss"] = *m.val_loss;
  if (m.val_ppl) d["val_ppl"] = *m.val_ppl;
  if (m.targets) d["targets"] = *m.targets;
  return d;
}

}  // namespace

void bind_train(nb::module_& m) {
  m.def("train", [](const std::vector<std::string>& args, nb::object callback, bool quiet) {
    train::TrainConfig config = train::load_train_config(train::parse_train_command_line(args));
    train::StepCallback on_step;
    if (!callback.is_none())
      on_step = [callback](const train::StepMetrics& step) {
        nb::gil_scoped_acquire gil;
        nb::object keep_going = callback(metrics_dict(step));
        return keep_going.is_none() || nb::cast<bool>(nb::bool_(keep_going));
      };
    std::ostream null_out(nullptr);
    train::TrainResult r;
    {
      nb::gil_scoped_release nogil;
      r = train::run_training(config, quiet ? null_out : std::cout, on_step);
      std::cout.flush();
    }
    nb::dict d;
    d["start_step"] = r.start_step;
    d["last_step"] = r.last_step;
    d["last_loss"] = r.last_loss ? nb::cast(*r.last_loss) : nb::none();
    d["last_grad_norm"] = r.last_grad_norm ? nb::cast(*r.last_grad_norm) : nb::none();
    d["stopped_by_signal"] = r.stopped_by_signal;
    d["stopped_by_callback"] = r.stopped_by_callback;
    d["last_checkpoint"] = r.last_checkpoint;
    d["dump_folder"] = config.job.dump_folder;
    return d;
  }, nb::arg("args"), nb::arg("callback") = nb::none(), nb::arg("quiet") = false,
     "Runs `kiln train ARGS...`; callback(metrics dict) after each step, False stops the run.");
}

}  // namespace kiln::python
