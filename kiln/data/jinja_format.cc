#include "kiln/data/jinja_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/data/jinja_strings.h"

namespace kiln::data::jinja {

namespace {

std::string py_int(const Json& v) {
  return v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
}

// str() and repr() differ only in how a top-level string is written: inside
// containers Python always uses repr().
std::string format(const Json& v, bool quote_strings) {
  switch (v.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return py_int(v);
    case Json::value_t::number_float:
      return py_float(v.get<double>());
    case Json::value_t::string:
      return quote_strings ? py_str_repr(v.get_ref<const std::string&>()) : v.get<std::string>();
    case Json::value_t::array: {
      std::string out = "[";
      for (const Json& item : v) out += (out.size() > 1 ? ", " : "") + format(item, true);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      for (const auto& [key, item] : v.items())
        out += (out.size() > 1 ? ", " : "") + py_str_repr(key) + ": " + format(item, true);
      return out + "}";
    }
    default:  // binary and discarded values never come from JSON text or templates
      return cat("<", v.type_name(), ">");
  }
}

// A JSON string literal as json.dumps writes it.
void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&](unsigned u) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", u);
    out += buf;
  };
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    char32_t c = decode_at(s, i, len);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
          hex4(c);
        } else if (!ensure_ascii || c < 0x80) {
          out += s.substr(i, len);
        } else if (c > 0xFFFF) {  // a surrogate pair, as Python writes astral code points
          hex4(0xD800 + ((c - 0x10000) >> 10));
          hex4(0xDC00 + ((c - 0x10000) & 0x3FF));
        } else {
          hex4(c);
        }
    }
  }
  out += '"';
}

struct Dumper {
  const DumpOptions& options;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int depth) {
    if (!options.indent) return;
    out += '\n';
    out.append(size_t(std::max(0, *options.indent) * depth), ' ');
  }

  void dump(const Json& v, int depth) {
    switch (v.type()) {
      case Json::value_t::null: out += "null"; return;
      case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
      case Json::value_t::number_float: {
        double d = v.get<double>();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : py_float(d);
        return;
      }
      case Json::value_t::string: dump_string(out, v.get_ref<const std::string&>(), options.ensure_ascii); return;
      case Json::value_t::array:
        container(v, depth, '[', ']', [&](const Json& item) { dump(item, depth + 1); });
        return;
      case Json::value_t::object: {
        std::vector<std::pair<const std::string*, const Json*>> items;
        for (const auto& [key, item] : v.items()) items.emplace_back(&key, &item);
        if (options.sort_keys)
          std::sort(items.begin(), items.end(), [](auto& a, auto& b) { return *a.first < *b.first; });
        container(items, depth, '{', '}', [&](const auto& kv) {
          dump_string(out, *kv.first, options.ensure_ascii);
          out += key_sep;
          dump(*kv.second, depth + 1);
        });
        return;
      }
      default: out += py_int(v); return;
    }
  }

  template <class Items, class Each>
  void container(const Items& items, int depth, char open, char close, Each each) {
    out += open;
    if (items.empty()) {
      out += close;
      return;
    }
    bool first = true;
    for (const auto& item : items) {
      if (!first) out += item_sep;
      first = false;
      newline(depth + 1);
      each(item);
    }
    newline(depth);
    out += close;
  }
};

}  // namespace

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  std::string_view sci(buf, size_t(end - buf));  // "-1.2345e+05": the shortest digits
  std::string out;
  if (sci[0] == '-') out += '-', sci.remove_prefix(1);
  size_t e_at = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_at))
    if (c != '.') digits += c;
  int exp = std::stoi(std::string(sci.substr(e_at + 1)));
  // Python writes fixed-point for exponents -4..15 and scientific otherwise.
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(size_t(-exp - 1), '0') + digits;
  if (digits.size() <= size_t(exp) + 1) return out + digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
  return out + digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
}

std::string py_str(const Json& v) { return format(v, false); }
std::string py_repr(const Json& v) { return format(v, true); }

std::string py_json_dumps(const Json& v, const DumpOptions& options) {
  Dumper d{options, options.indent ? "," : ", ", ": ", ""};
  if (options.separators) std::tie(d.item_sep, d.key_sep) = *options.separators;
  d.dump(v, 0);
  return d.out;
}

}  // namespace kiln::data::jinja
