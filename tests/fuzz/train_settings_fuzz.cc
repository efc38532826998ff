// `kiln train`'s command line (train/config.h): one argument a line,
// parsed and applied over the default recipe (a recipe named by --config
// is dropped: this target is about settings, not files).
#include "kiln/train/config.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/config_round_trip.h"

KILN_FUZZ_TARGET(input) {
  std::vector<std::string> args;
  std::string_view text = kiln::fuzz::as_text(input);
  while (!text.empty()) {
    size_t end = std::min(text.find('\n'), text.size());
    args.emplace_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  kiln::train::TrainCommandLine command_line = kiln::train::parse_train_command_line(args);
  command_line.config.clear();
  kiln::train::TrainConfig config = kiln::train::load_train_config(command_line);
  const std::string printed = kiln::train::to_toml(config);
  kiln::fuzz::check(kiln::fuzz::reparse(printed, kiln::fuzz::config_from_toml) == printed,
                    "a finalized config's TOML reads back as another config");
}
