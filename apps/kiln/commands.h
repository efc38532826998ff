// Subcommands of the kiln CLI; each adds itself to the app and runs from its
// callback (exceptions propagate to main, which prints them).
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <ostream>
#include <string>

#include "kiln/train/config.h"
#include "kiln/train/dry_run.h"

namespace kiln::cli {

// A count of at least 1 whose error reads "not in range 1 to N"
// (CLI::PositiveNumber's prints DBL_MAX).
inline const CLI::Range kPositiveCount(int64_t{1}, int64_t{1} << 40);

void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_demo(CLI::App& app);
void add_cache(CLI::App& app);
void add_tokenizer(CLI::App& app);
void add_train(CLI::App& app);
void add_generate(CLI::App& app);
void add_eval(CLI::App& app);
void add_convert(CLI::App& app);
void add_data(CLI::App& app);
void add_numerics_check(CLI::App& app);
void add_profile(CLI::App& app);

// `kiln info --model NAME`: seq_len <= 0 means the config's own.
void print_model_info(const std::string& name, int64_t seq_len, bool json);
// A count for people: 8030261248 -> "8.03B".
std::string human_count(double n);

// `kiln train --dry-run`: the plan as a table, or as JSON.
void print_dry_run(const train::TrainConfig& config, const train::DryRun& plan, bool json,
                   std::ostream& out);

}  // namespace kiln::cli
