// Byte counts as people read and write them: binary units (KiB = 1024 B).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// "512 B", "1.5 GiB" (`decimals` digits after the point above bytes).
std::string bytes_text(double bytes, int decimals = 1);

// "1048576", "512K", "64 MiB", "5G", "2.5GiB", "1T": a whole number of
// bytes, with an optional binary unit (K, M, G, T, optionally followed by
// "iB" or "B"; case-insensitive). Throws kiln::Error naming `what` otherwise.
int64_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace kiln
