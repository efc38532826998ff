// Checks every #include "kiln/..." in kiln/ against the allowed-dependency
// table kiln/layers.txt (the one CMake builds the layer targets from), and
// that docs/architecture.md shows the same table.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct Use {
  std::set<std::string> headers;  // empty: any header of the layer
};
struct Layer {
  std::string folder;
  std::map<std::string, Use> uses;
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The table's layer lines ("folder: use use{a.h b.h} ..."), comments dropped.
std::vector<std::string> table_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

// Parses the table; a use of a layer not listed above it is an error.
std::vector<Layer> parse_table(const std::string& text, std::vector<std::string>& errors) {
  std::vector<Layer> layers;
  std::regex line_re(R"(^([a-z_/]+):(.*)$)"), use_re(R"(([a-z_/]+)(\{([^}]*)\})?)");
  for (const std::string& line : table_lines(text)) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) {
      errors.push_back("kiln/layers.txt: cannot read line '" + line + "'");
      continue;
    }
    Layer layer{m[1], {}};
    std::string rest = m[2];
    for (std::sregex_iterator it(rest.begin(), rest.end(), use_re), end; it != end; ++it) {
      std::string used = (*it)[1];
      bool listed = std::any_of(layers.begin(), layers.end(),
                                [&](const Layer& l) { return l.folder == used; });
      if (!listed)
        errors.push_back("kiln/layers.txt: '" + layer.folder + "' uses '" + used +
                         "', which is not a layer listed above it");
      std::istringstream headers((*it)[3].str());
      Use use;
      for (std::string h; headers >> h;) use.headers.insert(h);
      layer.uses[used] = use;
    }
    layers.push_back(layer);
  }
  return layers;
}

// The layer a path under kiln/ belongs to (the longest matching folder).
const Layer* layer_of(const std::vector<Layer>& layers, const std::string& rel) {
  const Layer* best = nullptr;
  for (const Layer& l : layers)
    if (rel.rfind(l.folder + "/", 0) == 0 && (!best || l.folder.size() > best->folder.size()))
      best = &l;
  return best;
}

// Every include of a kiln header that the table does not allow, as
// "kiln/<file>:<line>: ...". Files directly in kiln/ (the umbrella header)
// belong to no layer and may include anything, but no layer may include them.
const std::set<std::string> kSourceExtensions = {".h", ".cc", ".cu", ".cuh"};

std::vector<std::string> check_tree(const fs::path& root, const std::vector<Layer>& layers) {
  std::vector<std::string> errors;
  std::regex include_re(R"(^\s*#\s*include\s*"kiln/([^"]+)\")");
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root / "kiln"))
    if (e.is_regular_file() && kSourceExtensions.count(e.path().extension().string()))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::string rel = fs::relative(file, root / "kiln").generic_string();
    bool umbrella = rel.find('/') == std::string::npos;
    const Layer* from = layer_of(layers, rel);
    if (!umbrella && !from) {
      errors.push_back("kiln/" + rel + ": its folder is no layer of kiln/layers.txt");
      continue;
    }
    std::istringstream in(read(file));
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      std::smatch m;
      if (umbrella || !std::regex_search(line, m, include_re)) continue;
      std::string target = m[1];
      std::string where = "kiln/" + rel + ":" + std::to_string(n) + ": includes kiln/" + target;
      const Layer* to = layer_of(layers, target);
      if (!to) {
        errors.push_back(where + ", which belongs to no layer");
        continue;
      }
      if (to == from) continue;
      auto use = from->uses.find(to->folder);
      if (use == from->uses.end()) {
        errors.push_back(where + ", but layer '" + from->folder + "' may not use '" +
                         to->folder + "' (kiln/layers.txt)");
        continue;
      }
      std::string header = target.substr(to->folder.size() + 1);
      if (!use->second.headers.empty() && !use->second.headers.count(header))
        errors.push_back(where + ", but layer '" + from->folder + "' may use only some headers of '" +
                         to->folder + "' (kiln/layers.txt), not " + header);
    }
  }
  return errors;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(Layers, TheTreeIncludesOnlyWhatTheTableAllows) {
  fs::path root = KILN_SOURCE_DIR;
  std::vector<std::string> errors;
  auto layers = parse_table(read(root / "kiln/layers.txt"), errors);
  ASSERT_TRUE(errors.empty()) << joined(errors);
  ASSERT_GE(layers.size(), 14u);
  errors = check_tree(root, layers);
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(Layers, ArchitectureDocShowsTheTable) {
  fs::path root = KILN_SOURCE_DIR;
  std::string doc = read(root / "docs/architecture.md");
  std::string table = joined(table_lines(read(root / "kiln/layers.txt")));
  EXPECT_NE(doc.find("```\n" + table + "```\n"), std::string::npos)
      << "docs/architecture.md must show kiln/layers.txt's layer lines as one code block:\n"
      << table;
}

// The checker itself: each kind of violation in a small made-up tree.
TEST(Layers, CheckerReportsEachKindOfViolation) {
  kiln::test::TempDir dir;
  dir.write("kiln/a/x.h", "#pragma once\n");
  dir.write("kiln/a/y.h", "#pragma once\n");
  dir.write("kiln/b/ok.cc", "#include \"kiln/b/ok.h\"\n#include \"kiln/a/x.h\"\n");
  dir.write("kiln/b/bad.cc", "// fine\n#include \"kiln/a/y.h\"\n");
  dir.write("kiln/a/up.cc", "#include \"kiln/b/ok.h\"\n");
  dir.write("kiln/c/stray.cc", "\n");
  dir.write("kiln/kiln.h", "#include \"kiln/b/ok.h\"\n");
  std::vector<std::string> errors;
  auto layers = parse_table("# comment\na:\nb: a{x.h}\n", errors);
  ASSERT_TRUE(errors.empty()) << joined(errors);
  auto found = check_tree(dir.path(), layers);
  std::string all = joined(found);
  EXPECT_EQ(found.size(), 3u) << all;
  EXPECT_NE(all.find("kiln/a/up.cc:1: includes kiln/b/ok.h, but layer 'a' may not use 'b'"),
            std::string::npos) << all;
  EXPECT_NE(all.find("kiln/b/bad.cc:2: includes kiln/a/y.h, but layer 'b' may use only some headers"),
            std::string::npos) << all;
  EXPECT_NE(all.find("kiln/c/stray.cc: its folder is no layer"), std::string::npos) << all;

  parse_table("a: b\nb:\n", errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("'a' uses 'b', which is not a layer listed above it"), std::string::npos);
}

}  // namespace
