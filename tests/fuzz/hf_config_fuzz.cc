// Hugging Face config.json (models/hf_config.h): a config that parses is a
// valid model config, and writing it back (hf_config_json) parses to the
// same one.
#include "kiln/models/hf_config.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  kiln::HfConfig hf = kiln::parse_hf_config(kiln::fuzz::as_text(input), "fuzz.json");
  hf.model.validate();
  const std::string written = kiln::hf_config_json(hf.model);
  kiln::HfConfig back = kiln::fuzz::reparse(
      written, [](const std::string& t) { return kiln::parse_hf_config(t, "written.json"); });
  kiln::fuzz::check(kiln::hf_config_json(back.model) == written,
                    "a parsed config, written back, parses as another config");
}
