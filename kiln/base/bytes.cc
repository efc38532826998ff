#include "kiln/base/bytes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/base/error.h"

namespace kiln {

std::string bytes_text(double bytes, int decimals) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024 && u < 4) bytes /= 1024, ++u;
  char s[48];
  std::snprintf(s, sizeof s, "%.*f %s", u ? decimals : 0, bytes, units[u]);
  return s;
}

int64_t parse_bytes(std::string_view text, std::string_view what) {
  auto bad = [&]() -> int64_t {
    fail(what, "='", text, "' is not a size: give bytes, optionally with a binary unit, as in "
         "1048576, 512M, 64MiB or 5G");
  };
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return bad();
  char* end = nullptr;
  const double number = std::strtod(s.c_str(), &end);
  const std::string unit(end);
  double scale = 1;
  if (!unit.empty() && unit != "b") {
    const size_t power = std::string_view("kmgt").find(unit[0]);
    const std::string rest = unit.substr(1);
    if (power == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib"))
      return bad();
    scale = std::ldexp(1.0, 10 * int(power + 1));
  }
  const double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes >= 9.2e18 || bytes != std::floor(bytes)) return bad();
  return int64_t(bytes);
}

}  // namespace kiln
