// The kiln command line. Each subcommand lives in its own file and adds
// itself to the app; errors become one line on stderr and exit code 1.
#include <CLI/CLI.hpp>

#include <iostream>

#include "apps/kiln/commands.h"
#include "apps/kiln/wait_policy.h"
#include "kiln/base/error.h"
#include "kiln/dist/world.h"

int main(int argc, char** argv) {
  kiln::cli::bound_openmp_spinning(argv);
  CLI::App app{"kiln: train transformer language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  kiln::cli::add_info(app);
  kiln::cli::add_bench(app);
  kiln::cli::add_demo(app);
  kiln::cli::add_cache(app);
  kiln::cli::add_tokenizer(app);
  kiln::cli::add_train(app);
  kiln::cli::add_generate(app);
  kiln::cli::add_eval(app);
  kiln::cli::add_convert(app);
  kiln::cli::add_data(app);
  kiln::cli::add_numerics_check(app);
  kiln::cli::add_profile(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // One write: under mpirun every rank's message shares one stream.
    std::cerr << std::string("kiln: error: ") + e.what() + "\n";
    kiln::dist::end_job_on_exit();  // no peer waits for this rank in a collective
    return 1;
  }
  return 0;
}
