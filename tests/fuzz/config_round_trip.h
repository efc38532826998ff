// What the two train-config fuzz targets share.
#pragma once
#include <string>

#include "kiln/train/config.h"

namespace kiln::fuzz {

// The TOML of the finalized config that `toml` describes (over the defaults).
inline std::string config_from_toml(const std::string& toml) {
  train::TrainConfig config;
  train::apply_toml(config, toml, "printed.toml");
  train::finalize(config);
  return train::to_toml(config);
}

}  // namespace kiln::fuzz
