// TensorBoard itself reads kiln's event files: the Python `tensorboard`
// package's EventAccumulator loads the scalars the MetricsLogger wrote.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/train/metrics.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd << "\n" << out;
  return out;
}

TEST(TensorBoardOracle, EventAccumulatorReadsTheScalars) {
  fs::path dir = fs::temp_directory_path() / ("kiln_tb_oracle_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  MetricsOptions o;
  o.dump_folder = dir.string();
  o.total_steps = 3;
  o.log_freq = 1;
  std::ostringstream out;
  {
    MetricsLogger log(o, 0, out);
    for (int64_t s = 1; s <= 3; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = 8.0 / double(s);
      m.grad_norm = 0.5 * double(s);
      m.lr = 1e-3 * double(s);
      m.tps = 1000;
      m.mem_peak_bytes = 4096;
      if (s == 3) m.val_loss = 2.25, m.mfu = 0.375;
      log.log(m);
    }
  }
  std::string script =
      "import json, sys\n"
      "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
      "ea = EventAccumulator(sys.argv[1]); ea.Reload()\n"
      "print(json.dumps({t: [[e.step, e.value] for e in ea.Scalars(t)] for t in "
      "ea.Tags()['scalars']}))\n";
  fs::path py = dir / "read_events.py";
  FILE* f = std::fopen(py.c_str(), "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  std::string text = run(std::string("\"") + KILN_PYTHON + "\" " + py.string() + " " +
                         (dir / "tb").string() + " 2>&1");
  nlohmann::json j = nlohmann::json::parse(text.substr(text.find('{')));
  auto series = [&](const char* tag) {
    return j.at(tag).get<std::vector<std::pair<int64_t, double>>>();
  };
  // simple_value is a float32: compare with the values rounded to float.
  EXPECT_EQ(series("loss"), (std::vector<std::pair<int64_t, double>>{
                                {1, 8.0}, {2, 4.0}, {3, double(float(8.0 / 3.0))}}));
  EXPECT_EQ(series("grad_norm")[2].second, 1.5);
  EXPECT_EQ(series("lr")[0].second, double(1e-3f));
  EXPECT_EQ(series("val_loss"), (std::vector<std::pair<int64_t, double>>{{3, 2.25}}));
  EXPECT_EQ(series("mfu"), (std::vector<std::pair<int64_t, double>>{{3, 0.375}}));
  EXPECT_EQ(series("mem_peak_bytes")[1].second, 4096.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::train
