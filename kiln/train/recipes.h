// Where recipes come from: the recipes/ folder shipped beside the binary
// (<exe_dir>/../recipes), the source tree's recipes/ (its path baked in at
// build time), and, for the default recipe only, a copy embedded in the
// library so an installed kiln trains with no files around it.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

struct Recipe {
  std::string text;
  std::string origin;  // the file's path, or "<embedded default recipe>"
};

// The folders searched for recipes by name, in order (those that exist).
std::vector<std::filesystem::path> recipe_dirs();

// A recipe file by path, or by name ("llama3_debug" or "llama3_debug.toml")
// from recipe_dirs(); throws kiln::Error listing the recipes there and the
// nearest name.
Recipe find_recipe(const std::string& path_or_name);

// recipes/default.toml from recipe_dirs(), else the embedded copy.
Recipe default_recipe();

// The text of recipes/default.toml when this library was built.
std::string_view embedded_default_recipe();

// The folder holding the running executable.
std::filesystem::path executable_dir();

}  // namespace kiln::train
