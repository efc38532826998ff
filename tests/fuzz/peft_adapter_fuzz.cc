// PEFT adapter configs (train/peft_adapter.h): an adapter_config.json comes
// with a download. An accepted config writes back (peft_config_json) as
// text that parses to the same options and base model.
#include "kiln/train/peft_adapter.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  const kiln::train::PeftAdapter a =
      kiln::train::parse_peft_config(kiln::fuzz::as_text(input), "adapter_config.json");
  const kiln::train::PeftAdapter b =
      kiln::train::parse_peft_config(kiln::train::peft_config_json(a), "written back");
  kiln::fuzz::check(a.options.rank == b.options.rank && a.options.alpha == b.options.alpha &&
                        a.options.targets == b.options.targets && a.base_model == b.base_model,
                    "the config written back reads as another");
}
