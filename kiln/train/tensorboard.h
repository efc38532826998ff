// TensorBoard event files written directly (no TensorFlow): a TFRecord
// stream of Event protocol buffers, each record
//   u64 length | u32 masked CRC32C(length) | Event bytes | u32 masked CRC32C(bytes)
// (little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8). The first
// event carries file_version "brain.Event:2"; each scalar is an Event
// {wall_time, step, summary {value {tag, simple_value}}}, encoded by hand.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln::train {

// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

class EventWriter {
 public:
  // Creates `dir` and the file events.out.tfevents.<seconds>.<host>.<pid>.kiln
  // in it; throws kiln::Error naming it when that fails.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void add_scalar(std::string_view tag, double value, int64_t step, double wall_time);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kiln::train
