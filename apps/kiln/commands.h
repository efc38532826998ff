// Subcommands of the kiln CLI; each adds itself to the app and runs from its
// callback (exceptions propagate to main, which prints them).
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace kiln::cli {

void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_demo(CLI::App& app);
void add_cache(CLI::App& app);
void add_tokenizer(CLI::App& app);
void add_train(CLI::App& app);
void add_generate(CLI::App& app);
void add_data(CLI::App& app);
void add_numerics_check(CLI::App& app);

// `kiln info --model NAME`: seq_len <= 0 means the config's own.
void print_model_info(const std::string& name, int64_t seq_len, bool json);

}  // namespace kiln::cli
