// safetensors files: header JSON, dtypes, shapes, offsets (io/safetensors.h);
// a file that opens has every tensor's bytes inside it, sized by its shape.
#include "kiln/io/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  kiln::SafetensorsFile file(kiln::fuzz::input_file(input));
  for (const auto& e : file.entries()) {
    kiln::fuzz::check(e.end <= input.size(), "an entry ends beyond the file");
    const uint64_t elements = uint64_t(e.shape.numel());
    kiln::fuzz::check(elements * kiln::itemsize(e.dtype) == file.bytes(e.name).size(),
                      "a tensor's size differs from its byte range");
  }
}
