// `kiln info --model NAME [--json]` as a user runs it: the JSON keys other
// tools read, the values for a published model, and a misspelt name.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct CliRun {
  int status;
  std::string out, err;
};

CliRun kiln(const std::string& args) {
  const char* cli = std::getenv("KILN_CLI");
  EXPECT_NE(cli, nullptr) << "KILN_CLI is set by ctest";
  std::string err_file = testing::TempDir() + "kiln_model_info_err.txt";
  std::string cmd = std::string(cli ? cli : "kiln") + " " + args + " 2>" + err_file;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  std::string err;
  if (FILE* f = std::fopen(err_file.c_str(), "r")) {
    while (size_t n = fread(buf.data(), 1, buf.size(), f)) err.append(buf.data(), n);
    std::fclose(f);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

TEST(ModelInfo, JsonForADenseModel) {
  CliRun r = kiln("info --model llama3_8b --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["params"], 8030261248);
  EXPECT_EQ(j["seq_len"], 8192);
  // 6 * (8030261248 - 128256 * 4096) + 12 * 32 * 32 * 128 * 8192
  EXPECT_EQ(j["flops_per_token"].get<double>(), 57914449920.0);
  EXPECT_EQ(j["dim"], 4096);
  EXPECT_EQ(j["n_layers"], 32);
  EXPECT_EQ(j["n_heads"], 32);
  EXPECT_EQ(j["n_kv_heads"], 8);
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_EQ(j["ffn_dim"], 14336);
  EXPECT_EQ(j["vocab_size"], 128256);
  EXPECT_FALSE(j.contains("n_experts"));
}

TEST(ModelInfo, JsonForAnMoEModelAndSeqLen) {
  CliRun r = kiln("info --model qwen3_moe_debug --json --seq-len 64");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["seq_len"], 64);
  EXPECT_EQ(j["n_experts"], 8);
  EXPECT_EQ(j["top_k"], 2);
  EXPECT_EQ(j["moe_ffn_dim"], 32);
  EXPECT_EQ(j["vocab_size"], 2048);
  EXPECT_LT(j["active_params"].get<int64_t>(), j["params"].get<int64_t>());
}

TEST(ModelInfo, TextAndUnknownName) {
  CliRun r = kiln("info --model qwen3_0.6b");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("596049920"), std::string::npos) << r.out;
  r = kiln("info --model qwen3_0.5b");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("did you mean 'qwen3_0.6b'"), std::string::npos) << r.err;
  // --seq-len and --json describe --model's numbers: alone, or out of range, they are errors.
  r = kiln("info --seq-len 512");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--seq-len requires --model"), std::string::npos) << r.err;
  r = kiln("info --model qwen3_0.6b --seq-len 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--seq-len: Value 0 not in range 1 to"), std::string::npos) << r.err;
}

}  // namespace
