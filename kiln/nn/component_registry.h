// The interchangeable implementations of a model component (attention,
// loss, MoE experts, norm): each registers its name, a one-line description
// and the function the model calls, from a static initialiser in its own
// file (kiln/nn/components/):
//
//   const nn::Registration<nn::AttentionFn> kFlash(nn::attention_impls(), "flash",
//                                                  "kiln::flash_attention: ...", flash);
//
// Modules look the configured name up when they are built, configs check
// names against the registry and list its choices. Each component's
// registry is a function-local static (attention_impls(), ...), so
// registrations from other files' static initialisers find it constructed.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::nn {

// What a config needs of a registry: the names and their descriptions.
class ComponentRegistryBase {
 public:
  explicit ComponentRegistryBase(std::string component) : component_(std::move(component)) {}
  ComponentRegistryBase(const ComponentRegistryBase&) = delete;
  ComponentRegistryBase& operator=(const ComponentRegistryBase&) = delete;

  const std::string& component() const { return component_; }  // "attention", "loss", ...
  std::vector<std::string> names() const;                      // sorted
  const std::string& description(std::string_view name) const;
  bool contains(std::string_view name) const { return descriptions_.count(name) > 0; }
  // kiln::Error unless `name` is registered: "<what> '<name>' is not a
  // registered <component> implementation (did you mean ...?); choices: ...".
  void check(std::string_view name, std::string_view what) const;

 protected:
  ~ComponentRegistryBase() = default;
  void add_name(std::string name, std::string description);

 private:
  std::string component_;
  std::map<std::string, std::string, std::less<>> descriptions_;
};

template <class Fn>
class ComponentRegistry : public ComponentRegistryBase {
 public:
  using ComponentRegistryBase::ComponentRegistryBase;

  // A name registered twice is a kiln::Error.
  void add(std::string name, std::string description, Fn fn) {
    add_name(name, std::move(description));
    fns_.emplace(std::move(name), std::move(fn));
  }
  // The implementation called `name`; an unknown one is a kiln::Error
  // naming the nearest and listing the choices.
  const Fn& get(std::string_view name) const {
    check(name, component() + " implementation");
    return fns_.find(name)->second;
  }

 private:
  std::map<std::string, Fn, std::less<>> fns_;
};

// Registers one implementation when constructed (a namespace-scope object).
template <class Fn>
struct Registration {
  Registration(ComponentRegistry<Fn>& registry, std::string name, std::string description, Fn fn) {
    registry.add(std::move(name), std::move(description), std::move(fn));
  }
};

}  // namespace kiln::nn
