#include "kiln/nn/component_registry.h"

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"

namespace kiln::nn {

std::vector<std::string> ComponentRegistryBase::names() const {
  std::vector<std::string> out;
  for (const auto& [name, description] : descriptions_) out.push_back(name);
  return out;
}

const std::string& ComponentRegistryBase::description(std::string_view name) const {
  check(name, component_ + " implementation");
  return descriptions_.find(name)->second;
}

void ComponentRegistryBase::check(std::string_view name, std::string_view what) const {
  if (contains(name)) return;
  std::vector<std::string> all = names();
  std::string list;
  for (const std::string& n : all) list += (list.empty() ? "" : ", ") + n;
  fail(what, " '", name, "' is not a registered ", component_, " implementation (did you mean '",
       nearest(name, all), "'?); choices: ", list);
}

void ComponentRegistryBase::add_name(std::string name, std::string description) {
  KILN_CHECK(!name.empty() && !contains(name), component_, " implementation '", name,
             "' is registered twice (or has no name)");
  descriptions_.emplace(std::move(name), std::move(description));
}

}  // namespace kiln::nn
