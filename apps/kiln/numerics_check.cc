// `kiln numerics-check`: step 1 of a recipe under a baseline and a candidate
// flag set; says whether loss and gradient norm are bit-identical, differ in
// the last bits, or differ materially (exit status 2).
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "apps/kiln/commands.h"
#include "kiln/base/error.h"
#include "kiln/train/numerics_check.h"

namespace kiln::cli {
namespace {

// "--a=1 --b 2" -> the settings kiln train would take from those words.
train::Settings parse_flag_set(const std::string& option, const std::string& words) {
  std::istringstream in(words);
  std::vector<std::string> args;
  for (std::string w; in >> w;) args.push_back(w);
  train::TrainCommandLine cl = train::parse_train_command_line(args);
  KILN_CHECK(cl.config.empty() && !cl.print_config, option, " '", words,
             "': give --config and --print-config outside the flag sets; ", option,
             " takes --section.key=value settings and --override component=impl");
  return cl.settings;
}

}  // namespace

void add_numerics_check(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "numerics-check",
      "Run step 1 of a recipe under two flag sets and compare loss and gradient norm");
  cmd->prefix_command();
  cmd->footer(
      "Arguments:\n"
      "  --candidate \"FLAGS\"     the flag set under test, e.g. \"--compile.graph_trainer=false\"\n"
      "  --baseline \"FLAGS\"      the reference flag set (default: the recipe as it is)\n"
      "  --steps N               compare after N steps (default 1)\n"
      "  --config, --section.key=VALUE, --override   the recipe both runs share\n"
      "Outputs go to <job.dump_folder>/numerics_check/{baseline,candidate}.\n"
      "Exit status: 0 bit-identical or last bits, 2 materially different.");
  cmd->callback([cmd] {
    std::vector<std::string> rest;
    std::string baseline, candidate;
    bool has_candidate = false;
    int64_t steps = 1;
    std::vector<std::string> args = cmd->remaining();
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto value = [&](const std::string& name) -> std::optional<std::string> {
        if (a.starts_with(name + "=")) return a.substr(name.size() + 1);
        if (a != name) return std::nullopt;
        KILN_CHECK(i + 1 < args.size(), name, " needs a value");
        return args[++i];
      };
      if (auto v = value("--baseline")) baseline = *v;
      else if (auto v = value("--candidate")) candidate = *v, has_candidate = true;
      else if (auto v = value("--steps")) {
        char* end = nullptr;
        steps = std::strtoll(v->c_str(), &end, 10);
        KILN_CHECK(!v->empty() && *end == 0, "--steps '", *v, "': expected a whole number");
      } else rest.push_back(a);
    }
    KILN_CHECK(has_candidate, "numerics-check needs --candidate \"FLAGS\" (the flag set to "
               "compare with the recipe), e.g. --candidate \"--compile.graph_trainer\"");
    train::TrainCommandLine recipe = train::parse_train_command_line(rest);
    train::NumericsReport r =
        train::numerics_check(recipe, parse_flag_set("--baseline", baseline),
                              parse_flag_set("--candidate", candidate), steps, std::cout);
    train::print_report(r, std::cout);
    if (r.overall() == train::Agreement::material) {
      std::cout.flush();
      std::exit(2);
    }
  });
}

}  // namespace kiln::cli
