// `kiln train`: runs a training recipe. Every argument is handed to the
// config parser (kiln/train/config.h): --config FILE|NAME, --print-config,
// --override component=impl and --section.key=value settings.
#include <cstdlib>
#include <iostream>

#include "apps/kiln/commands.h"
#include "kiln/train/config.h"
#include "kiln/train/dry_run.h"
#include "kiln/train/trainer.h"

namespace kiln::cli {

void add_train(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("train", "Train a model from a recipe (default: recipes/default.toml)");
  cmd->prefix_command();  // all arguments go to the config parser
  cmd->footer(
      "Arguments:\n"
      "  --config FILE|NAME        a TOML recipe, or a recipe name from recipes/\n"
      "  --section.key=VALUE       any config key, e.g. --training.steps=100\n"
      "                            (--section.key VALUE and a bare --bool.key work too)\n"
      "  --override COMPONENT=IMPL swap a component, one of\n"
      "                            " + train::component_choices() + "\n"
      "  --print-config            print the effective config as TOML and exit\n"
      "  --dry-run                 plan the run without running it: the mesh, the model's\n"
      "                            shapes and FLOPs, the memory per rank (nothing allocated)\n"
      "  --world-size N            the dry run's ranks (default: the parallelism degrees')\n"
      "  --json                    the dry run as JSON\n"
      "A run interrupted by SIGINT/SIGTERM finishes its step, saves a checkpoint (when\n"
      "checkpoint.enable) and exits with 128 + the signal number; running the same\n"
      "command again resumes it.");
  cmd->callback([cmd] {
    train::TrainCommandLine cl = train::parse_train_command_line(cmd->remaining());
    train::TrainConfig config = train::load_train_config(cl);
    if (cl.print_config) {
      std::cout << train::to_toml(config);
      return;
    }
    if (cl.dry_run) {
      print_dry_run(config, train::dry_run(config, cl.world_size), cl.json, std::cout);
      return;
    }
    train::TrainResult r = train::run_training(config, std::cout);
    if (r.stopped_by_signal) {
      std::cout.flush();
      std::exit(128 + r.stopped_by_signal);
    }
  });
}

}  // namespace kiln::cli
