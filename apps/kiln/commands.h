// Subcommands of the kiln CLI; each adds itself to the app and runs from its
// callback (exceptions propagate to main, which prints them).
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_demo(CLI::App& app);
void add_cache(CLI::App& app);
void add_tokenizer(CLI::App& app);

}  // namespace kiln::cli
