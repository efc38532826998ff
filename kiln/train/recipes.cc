#include "kiln/train/recipes.h"

#include <algorithm>
#include <fstream>
#include <system_error>

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"
#include "kiln/train/toml_shape.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

// Reads at most one byte past the limit: apply_toml refuses a larger text
// by its size, without reading a huge file whole first.
Recipe read_recipe(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, "cannot read recipe ", path.string());
  std::string text(kMaxTomlBytes + 1, '\0');
  f.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(f.gcount()));
  return {text, path.string()};
}

}  // namespace

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

std::vector<fs::path> recipe_dirs() {
  std::vector<fs::path> candidates;
  if (fs::path exe = executable_dir(); !exe.empty()) candidates.push_back(exe / ".." / "recipes");
  candidates.push_back(KILN_RECIPES_DIR);
  std::vector<fs::path> out;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    fs::path canonical = fs::canonical(p, ec);
    if (!ec && fs::is_directory(canonical) &&
        std::find(out.begin(), out.end(), canonical) == out.end())
      out.push_back(canonical);
  }
  return out;
}

Recipe find_recipe(const std::string& path_or_name) {
  std::error_code ec;
  if (fs::is_regular_file(path_or_name, ec)) return read_recipe(path_or_name);
  KILN_CHECK(!fs::exists(path_or_name, ec), "recipe '", path_or_name, "' is ",
             fs::is_directory(path_or_name, ec) ? "a folder" : "not a regular file",
             "; --config takes a recipe file (.toml) or a recipe's name");
  std::vector<std::string> names;
  if (path_or_name.find('/') == std::string::npos) {
    std::string file = path_or_name.ends_with(".toml") ? path_or_name : path_or_name + ".toml";
    for (const fs::path& dir : recipe_dirs()) {
      if (fs::is_regular_file(dir / file, ec)) return read_recipe(dir / file);
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
  if (names.empty())
    fail("recipe '", path_or_name, "' not found: no such file (recipes by name are looked up in ",
         "<kiln>/../recipes and ", KILN_RECIPES_DIR, ")");
  fail("recipe '", path_or_name, "' not found (did you mean '", nearest(path_or_name, names),
       "'?); recipes: ", listed);
}

Recipe default_recipe() {
  for (const fs::path& dir : recipe_dirs()) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "default.toml", ec)) return read_recipe(dir / "default.toml");
  }
  return {std::string(embedded_default_recipe()), "<embedded default recipe>"};
}

}  // namespace kiln::train
