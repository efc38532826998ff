#include "kiln/train/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kiln/base/bytes.h"
#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"

namespace kiln::train {
namespace {

std::string g17(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN or infinity
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// The shortest text that reads back as the same float (losses are f32).
std::string shortest(float v) {
  char buf[40];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, p);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}


std::string duration_text(double seconds) {
  int64_t s = int64_t(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

// Rewrites `path` keeping only the lines whose "step" is at most `last`.
// Keeps the complete records of steps up to `last`. A line without its
// newline (cut off by a full disk or a kill) or that is not a record goes
// too: appending after it would join two lines into invalid JSON.
void drop_lines_after(const std::string& path, int64_t last) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  std::string kept;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;
    std::string_view line(text.data() + begin, end - begin);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() <= last)
      kept.append(line).push_back('\n');
    begin = end + 1;
  }
  if (kept.size() != text.size()) write_file_atomic(path, kept);
}

}  // namespace

ExpertLoad expert_load(const std::vector<std::vector<int64_t>>& tokens, int64_t dropped) {
  ExpertLoad load;
  load.dropped = dropped;
  for (const std::vector<int64_t>& layer : tokens) {
    load.tokens_per_expert.resize(layer.size());
    int64_t total = 0, busiest = 0;
    for (size_t e = 0; e < layer.size(); ++e) {
      load.tokens_per_expert[e] += layer[e];
      total += layer[e];
      busiest = std::max(busiest, layer[e]);
    }
    if (total > 0)
      load.max_load_ratio =
          std::max(load.max_load_ratio, double(busiest) * double(layer.size()) / double(total));
  }
  return load;
}

std::string metrics_json(const StepMetrics& m) {
  std::ostringstream os;
  os << "{\"step\": " << m.step << ", \"loss\": " << g17(m.loss)
     << ", \"grad_norm\": " << g17(m.grad_norm) << ", \"lr\": " << g17(m.lr)
     << ", \"tps\": " << g17(m.tps) << ", \"tflops\": " << g17(m.tflops)
     << ", \"mfu\": " << (m.mfu ? g17(*m.mfu) : "null")
     << ", \"mem_peak_bytes\": " << m.mem_peak_bytes;
  if (m.mem_offload_peak_bytes) os << ", \"mem_offload_peak_bytes\": " << *m.mem_offload_peak_bytes;
  if (m.val_loss) os << ", \"val_loss\": " << g17(*m.val_loss);
  if (m.val_ppl) os << ", \"val_ppl\": " << g17(*m.val_ppl);
  if (m.targets) os << ", \"targets\": " << *m.targets;
  if (m.moe) {
    os << ", \"moe_tokens_per_expert\": [";
    for (size_t e = 0; e < m.moe->tokens_per_expert.size(); ++e)
      os << (e ? ", " : "") << m.moe->tokens_per_expert[e];
    os << "], \"moe_max_load_ratio\": " << g17(m.moe->max_load_ratio)
       << ", \"moe_dropped\": " << m.moe->dropped;
  }
  os << "}";
  return os.str();
}

std::string metrics_line(const StepMetrics& m) {
  std::ostringstream os;
  os << "step " << m.step << "  loss " << shortest(float(m.loss)) << "  grad_norm "
     << fixed(m.grad_norm, 4) << "  lr " <<
      [&] {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.3e", m.lr);
        return std::string(buf);
      }()
     << "  tps " << fixed(m.tps, 0) << "  tflops " << fixed(m.tflops, 3) << "  mfu "
     << (m.mfu ? fixed(100 * *m.mfu, 2) + "%" : "unknown") << "  mem "
     << bytes_text(m.mem_peak_bytes);
  if (m.mem_offload_peak_bytes) os << " (+" << bytes_text(*m.mem_offload_peak_bytes) << " offloaded)";
  if (m.val_loss) os << "  val_loss " << shortest(float(*m.val_loss));
  if (m.val_ppl) os << "  val_ppl " << fixed(*m.val_ppl, 3);
  if (m.targets) os << "  targets " << *m.targets;
  if (m.moe) {
    os << "  moe_load " << fixed(m.moe->max_load_ratio, 2) << "x";
    if (m.moe->dropped) os << "  dropped " << m.moe->dropped;
  }
  return os.str();
}

MetricsLogger::MetricsLogger(const MetricsOptions& options, int64_t start_step, std::ostream& out)
    : options_(options), start_step_(start_step), out_(out) {
  std::error_code ec;
  std::filesystem::create_directories(options.dump_folder, ec);
  std::string path = jsonl_path();
  if (start_step > 0) drop_lines_after(path, start_step);
  jsonl_ = std::fopen(path.c_str(), start_step > 0 ? "ab" : "wb");
  KILN_CHECK(jsonl_, "cannot write ", path, "; pick a writable --job.dump_folder");
  if (options.enable_tensorboard)
    tb_ = std::make_unique<EventWriter>(
        (std::filesystem::path(options.dump_folder) / options.tb_folder).string());
  tty_ = options.progress_bar && ::isatty(STDERR_FILENO);
  started_ = std::chrono::steady_clock::now();
}

MetricsLogger::~MetricsLogger() {
  clear_bar();
  if (jsonl_) std::fclose(jsonl_);
}

std::string MetricsLogger::jsonl_path() const {
  return (std::filesystem::path(options_.dump_folder) / "metrics.jsonl").string();
}

bool MetricsLogger::should_log(int64_t step) const {
  return step % options_.log_freq == 0 || step == start_step_ + 1 || step == options_.total_steps;
}

void MetricsLogger::log(const StepMetrics& m) {
  clear_bar();
  out_ << metrics_line(m) << std::endl;
  std::string line = metrics_json(m) + "\n";
  KILN_CHECK(
      std::fwrite(line.data(), 1, line.size(), jsonl_) == line.size() && std::fflush(jsonl_) == 0,
      "cannot write ", jsonl_path());
  if (tb_) {
    double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    tb_->add_scalar("loss", m.loss, m.step, now);
    tb_->add_scalar("grad_norm", m.grad_norm, m.step, now);
    tb_->add_scalar("lr", m.lr, m.step, now);
    tb_->add_scalar("tps", m.tps, m.step, now);
    tb_->add_scalar("tflops", m.tflops, m.step, now);
    if (m.mfu) tb_->add_scalar("mfu", *m.mfu, m.step, now);
    tb_->add_scalar("mem_peak_bytes", double(m.mem_peak_bytes), m.step, now);
    if (m.mem_offload_peak_bytes)
      tb_->add_scalar("mem_offload_peak_bytes", double(*m.mem_offload_peak_bytes), m.step, now);
    if (m.val_loss) tb_->add_scalar("val_loss", *m.val_loss, m.step, now);
    if (m.val_ppl) tb_->add_scalar("val_ppl", *m.val_ppl, m.step, now);
    if (m.targets) tb_->add_scalar("targets", double(*m.targets), m.step, now);
    if (m.moe) {
      tb_->add_scalar("moe_max_load_ratio", m.moe->max_load_ratio, m.step, now);
      tb_->add_scalar("moe_dropped", double(m.moe->dropped), m.step, now);
    }
    tb_->flush();
  }
}

void MetricsLogger::progress(int64_t step) {
  if (!tty_) return;
  const int64_t total = options_.total_steps, done = step - start_step_;
  const int width = 30;
  double frac = total > 0 ? double(step) / double(total) : 1.0;
  int filled = int(frac * width);
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string eta = done > 0 ? duration_text(elapsed / double(done) * double(total - step)) : "?";
  std::string bar(size_t(filled), '=');
  if (filled < width) bar += '>' + std::string(size_t(width - filled - 1), ' ');
  std::cerr << "\r\033[K[" << bar << "] " << step << "/" << total << " " << int(100 * frac)
            << "%  elapsed " << duration_text(elapsed) << "  ETA " << eta << std::flush;
  bar_shown_ = true;
}

void MetricsLogger::note(const std::string& line) {
  clear_bar();
  out_ << line << std::endl;
}

void MetricsLogger::clear_bar() {
  if (!bar_shown_) return;
  std::cerr << "\r\033[K" << std::flush;
  bar_shown_ = false;
}

}  // namespace kiln::train
