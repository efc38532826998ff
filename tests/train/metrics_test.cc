// Metrics: the JSONL line (keys, full-precision losses, null MFU), the
// readable line, which steps are logged, resumed logs, and the TensorBoard
// record framing (CRC32C against its published check value).
#include "kiln/train/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/train/tensorboard.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("kiln_metrics_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  return d;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::ifstream f(p);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

StepMetrics sample(int64_t step) {
  StepMetrics m;
  m.step = step;
  m.loss = double(7.6325216f);  // an f32 loss, as the trainer reads it
  m.grad_norm = 0.1 + 1.0 / 3.0;
  m.lr = 3e-4;
  m.tps = 12345.5;
  m.tflops = 0.25;
  m.mem_peak_bytes = 3 << 20;
  return m;
}

TEST(Metrics, JsonHasEveryKeyWithFullPrecision) {
  StepMetrics m = sample(20);
  nlohmann::json j = nlohmann::json::parse(metrics_json(m));
  for (const char* k :
       {"step", "loss", "grad_norm", "lr", "tps", "tflops", "mfu", "mem_peak_bytes"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["step"], 20);
  EXPECT_EQ(j["loss"].get<double>(), m.loss);  // bit-exact round trip
  EXPECT_EQ(j["grad_norm"].get<double>(), m.grad_norm);
  EXPECT_TRUE(j["mfu"].is_null());  // unknown peak: null, never a number
  EXPECT_FALSE(j.contains("val_loss"));
  m.mfu = 0.125;
  m.val_loss = 1.0 / 7.0;
  m.val_ppl = 1.15;
  j = nlohmann::json::parse(metrics_json(m));
  EXPECT_EQ(j["mfu"].get<double>(), 0.125);
  EXPECT_EQ(j["val_loss"].get<double>(), 1.0 / 7.0);
  EXPECT_EQ(j["val_ppl"].get<double>(), 1.15);
}

// Two layers of 4 experts: the worst layer's busiest expert over its mean.
TEST(Metrics, ExpertLoadOfAnMoEStep) {
  ExpertLoad load = expert_load({{4, 4, 4, 4}, {10, 2, 2, 2}}, 3);
  EXPECT_EQ(load.tokens_per_expert, (std::vector<int64_t>{14, 6, 6, 6}));
  EXPECT_DOUBLE_EQ(load.max_load_ratio, 2.5);  // 10 / (16 / 4)
  EXPECT_EQ(load.dropped, 3);
  StepMetrics m = sample(4);
  m.moe = load;
  nlohmann::json j = nlohmann::json::parse(metrics_json(m));
  EXPECT_EQ(j["moe_tokens_per_expert"], nlohmann::json({14, 6, 6, 6}));
  EXPECT_EQ(j["moe_max_load_ratio"].get<double>(), 2.5);
  EXPECT_EQ(j["moe_dropped"], 3);
  EXPECT_NE(metrics_line(m).find("moe_load 2.50x  dropped 3"), std::string::npos)
      << metrics_line(m);
  EXPECT_FALSE(nlohmann::json::parse(metrics_json(sample(4))).contains("moe_dropped"));
}

TEST(Metrics, ReadableLine) {
  StepMetrics m = sample(3);
  std::string line = metrics_line(m);
  EXPECT_NE(line.find("step 3"), std::string::npos) << line;
  EXPECT_NE(line.find("loss 7.6325216"), std::string::npos) << line;  // every digit of the f32
  EXPECT_NE(line.find("mfu unknown"), std::string::npos) << line;
  EXPECT_NE(line.find("mem 3.0 MiB"), std::string::npos) << line;
  m.mfu = 0.5;
  EXPECT_NE(metrics_line(m).find("mfu 50.00%"), std::string::npos) << metrics_line(m);
}

TEST(Metrics, LoggerWritesJsonlAndLogsTheRightSteps) {
  fs::path dir = temp_dir("logger");
  MetricsOptions o;
  o.dump_folder = dir.string();
  o.total_steps = 25;
  o.log_freq = 10;
  o.enable_tensorboard = true;
  std::ostringstream out;
  {
    MetricsLogger log(o, 0, out);
    std::vector<int64_t> logged;
    for (int64_t s = 1; s <= 25; ++s)
      if (log.should_log(s)) logged.push_back(s), log.log(sample(s));
    EXPECT_EQ(logged, (std::vector<int64_t>{1, 10, 20, 25}));
    ASSERT_NE(log.tensorboard(), nullptr);
    EXPECT_TRUE(fs::exists(log.tensorboard()->path()));
    EXPECT_EQ(fs::path(log.tensorboard()->path()).parent_path(), dir / "tb");
  }
  std::vector<nlohmann::json> lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3]["step"], 25);
  EXPECT_NE(out.str().find("step 10  loss"), std::string::npos);

  // A run resumed from step 10 drops what the first one logged after it.
  {
    MetricsLogger log(o, 10, out);
    EXPECT_TRUE(log.should_log(11));
    log.log(sample(11));
  }
  lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_EQ(lines[1]["step"], 10);
  EXPECT_EQ(lines[2]["step"], 11);

  // A last line cut off (a full disk) is dropped, not appended to, even
  // when no step comes after the resumed one.
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\": 12, \"lo";
  {
    MetricsLogger log(o, 11, out);
    log.log(sample(12));
  }
  lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3]["step"], 12);
  fs::remove_all(dir);
}

TEST(TensorBoard, Crc32cCheckValue) {
  // The CRC-32C check value (RFC 3720 / the CRC catalogue): "123456789" -> 0xE3069283.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, RecordsAreFramedAndChecksummed) {
  fs::path dir = temp_dir("tb");
  std::string path;
  {
    EventWriter w(dir.string());
    w.add_scalar("loss", 2.5, 7, 1000.0);
    path = w.path();
  }
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  size_t at = 0, records = 0;
  std::string last;
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, bytes.data() + at, 8);
    std::memcpy(&len_crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(len_crc, masked_crc32c(&len, 8));
    ASSERT_LE(at + 12 + len + 4, bytes.size());
    last = bytes.substr(at + 12, len);
    std::memcpy(&data_crc, bytes.data() + at + 12 + len, 4);
    EXPECT_EQ(data_crc, masked_crc32c(last.data(), last.size()));
    at += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(records, 2u);  // the file_version event and the scalar
  // The scalar event ends with its summary: ... tag "loss", simple_value 2.5f.
  float v = 2.5f;
  std::string tail =
      std::string("\x0a\x04loss\x15", 7) + std::string(reinterpret_cast<char*>(&v), 4);
  EXPECT_TRUE(last.ends_with(tail));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::train
