// TOML recipes (train/config.h): a recipe that applies and finalizes
// prints (to_toml) as a recipe that reads back to the same config.
#include "kiln/train/config.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/config_round_trip.h"

KILN_FUZZ_TARGET(input) {
  kiln::train::TrainConfig config;
  kiln::train::apply_toml(config, kiln::fuzz::as_text(input), "fuzz.toml");
  kiln::train::finalize(config);
  const std::string printed = kiln::train::to_toml(config);
  kiln::fuzz::check(kiln::fuzz::reparse(printed, kiln::fuzz::config_from_toml) == printed,
                    "a finalized config's TOML reads back as another config");
}
