// A fresh directory under the system temp folder, removed with its contents
// when the object goes out of scope.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace kiln::test {

// The bytes of file `path` ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name, creating parent folders.
  std::string operator/(const std::string& name) const {
    auto p = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(p.parent_path());
    return p.string();
  }
  // Writes `contents` to path()/name and returns that path.
  std::string write(const std::string& name, std::string_view contents) const {
    std::string p = *this / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace kiln::test
