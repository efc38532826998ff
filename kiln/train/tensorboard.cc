#include "kiln/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>

#include "kiln/base/error.h"

namespace kiln::train {
namespace {

// Protocol buffer wire format: varints and tagged fields.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, uint64_t(field) << 3 | wire_type);
}

void put_fixed(std::string& out, const void* p, size_t n) {  // little-endian hosts only
  out.append(static_cast<const char*>(p), n);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, int field, double v) {
  put_tag(out, field, 1);
  put_fixed(out, &v, 8);
}

// Event fields: wall_time = 1 (double), step = 2 (int64), file_version = 3
// (string), summary = 5. Summary.value = 1; Value.tag = 1, simple_value = 2 (float).
std::string event(double wall_time, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);
  put_tag(e, 2, 0);
  put_varint(e, uint64_t(step));
  return e;
}

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return t;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto& t = crc_table();
  uint32_t c = 0xffffffffu;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ =
      (std::filesystem::path(dir) /
       cat("events.out.tfevents.", std::chrono::duration_cast<std::chrono::seconds>(now).count(),
           ".", host, ".", ::getpid(), ".kiln"))
          .string();
  file_ = std::fopen(path_.c_str(), "wb");
  KILN_CHECK(file_, "cannot create the TensorBoard event file ", path_,
             "; set --metrics.enable_tensorboard=false or pick a writable --job.dump_folder");
  std::string e = event(std::chrono::duration<double>(now).count(), 0);
  put_bytes(e, 3, "brain.Event:2");
  write_record(e);
  flush();
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::add_scalar(std::string_view tag, double value, int64_t step, double wall_time) {
  std::string v;
  put_bytes(v, 1, tag);
  float f = float(value);
  put_tag(v, 2, 5);
  put_fixed(v, &f, 4);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event(wall_time, step);
  put_bytes(e, 5, summary);
  write_record(e);
}

void EventWriter::write_record(const std::string& data) {
  uint64_t len = data.size();
  uint32_t len_crc = masked_crc32c(&len, 8), data_crc = masked_crc32c(data.data(), data.size());
  bool ok = std::fwrite(&len, 8, 1, file_) == 1 && std::fwrite(&len_crc, 4, 1, file_) == 1 &&
            std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
            std::fwrite(&data_crc, 4, 1, file_) == 1;
  KILN_CHECK(ok, "cannot write the TensorBoard event file ", path_);
}

void EventWriter::flush() { std::fflush(file_); }

}  // namespace kiln::train
