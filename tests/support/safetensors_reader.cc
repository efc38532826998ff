#include "tests/support/safetensors_reader.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "kiln/base/error.h"

namespace kiln::test {
namespace {

DType parse_safetensors_dtype(const std::string& s, const std::string& path) {
  if (s == "F32") return DType::f32;
  if (s == "F64") return DType::f64;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  if (s == "BOOL") return DType::b8;
  fail(path, ": unsupported safetensors dtype '", s, "'");
}

}  // namespace

SafeTensors::SafeTensors(const std::string& path) : path_(path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "cannot open safetensors file '", path, "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  KILN_CHECK(bytes.size() >= 8, path, ": too short for a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | uint8_t(bytes[i]);
  KILN_CHECK(header_len <= bytes.size() - 8, path, ": header length ", header_len,
             " exceeds the file size ", bytes.size());
  try {
    header_ = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(header_len));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": bad JSON header: ", e.what());
  }
  if (header_.contains("__metadata__")) {
    metadata_ = header_["__metadata__"];
    header_.erase("__metadata__");
  }
  data_.assign(bytes.begin() + 8 + int64_t(header_len), bytes.end());
}

bool SafeTensors::has(const std::string& name) const { return header_.contains(name); }

Tensor SafeTensors::get(const std::string& name) const {
  KILN_CHECK(has(name), path_, ": no tensor named '", name, "'");
  const nlohmann::json& e = header_.at(name);
  DType dtype = parse_safetensors_dtype(e.at("dtype").get<std::string>(), path_);
  Shape shape(e.at("shape").get<std::vector<int64_t>>());
  auto range = e.at("data_offsets").get<std::vector<uint64_t>>();
  KILN_CHECK(range.size() == 2 && range[0] <= range[1] && range[1] <= data_.size(), path_,
             ": tensor '", name, "' has a bad byte range");
  KILN_CHECK(range[1] - range[0] == uint64_t(shape.numel()) * itemsize(dtype), path_, ": tensor '",
             name, "' holds ", range[1] - range[0], " bytes, not the ",
             uint64_t(shape.numel()) * itemsize(dtype), " its shape needs");
  return from_host(data_.data() + range[0], dtype, shape);
}

}  // namespace kiln::test
