// Reads a safetensors file (as the oracle generators write it) into kiln
// tensors: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw data. Test-only.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::test {

class SafeTensors {
 public:
  // Throws kiln::Error when the file is missing or malformed.
  explicit SafeTensors(const std::string& path);

  bool has(const std::string& name) const;
  // A fresh CPU tensor holding the named entry; throws if there is none.
  Tensor get(const std::string& name) const;
  // The header's __metadata__ object (string keys to string values).
  const nlohmann::json& metadata() const { return metadata_; }

 private:
  std::string path_;
  nlohmann::json header_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<char> data_;
};

}  // namespace kiln::test
