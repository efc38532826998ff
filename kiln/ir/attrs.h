// Node attributes: a small sorted map from name to a typed value. Sorted so
// printing and fingerprinting are deterministic.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/base/dtype.h"

namespace kiln::ir {

using IntList = std::vector<int64_t>;
using AttrValue = std::variant<int64_t, double, bool, std::string, IntList, DType>;

enum class AttrKind { int_, float_, bool_, string, ints, dtype };
const char* attr_kind_name(AttrKind k);
AttrKind kind_of(const AttrValue& v);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  void set(const std::string& name, AttrValue v);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const AttrValue* find(const std::string& name) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }

  // Typed access; a missing attribute or the wrong kind is a kiln::Error.
  int64_t i(const std::string& name) const;
  double f(const std::string& name) const;  // accepts int values too
  bool b(const std::string& name) const;
  const std::string& s(const std::string& name) const;
  const IntList& ints(const std::string& name) const;
  DType dtype(const std::string& name) const;

  friend bool operator==(const Attrs& a, const Attrs& b) { return a.items_ == b.items_; }

 private:
  template <class T> const T& get(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

std::string to_string(const AttrValue& v);  // the IR text form, parseable back

}  // namespace kiln::ir
