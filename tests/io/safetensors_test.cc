// The safetensors reader and writer: round trips of every dtype, and every
// kind of corrupt or hostile file rejected with an error that names the file
// (and tensor), never a crash or a read past the mapping.
#include "kiln/io/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// A file with an explicit header length (normally header.size()), header and data.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               uint64_t header_len) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&header_len), 8);
  f << header << data;
}
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  write_raw(path, header, data, header.size());
}

// Runs `f`, expecting a kiln::Error whose message contains every part.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error was raised";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// Bytes of a contiguous host tensor.
std::vector<uint8_t> raw(const Tensor& t) {
  std::vector<uint8_t> out(size_t(t.numel()) * itemsize(t.dtype()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<bool> v = t.to_vector<bool>();
      for (size_t i = 0; i < v.size(); ++i) out[i] = v[i];
    } else {
      std::vector<T> v = t.to_vector<T>();
      if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
    }
  });
  return out;
}

Tensor sample(DType dtype, const Shape& shape) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = dtype == DType::b8 ? double(i % 3 == 0) : double(i) * 0.75 - 3;
  return from_vector(v, shape).to(dtype);
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  NamedTensors tensors;
  for (DType d : kAllDTypes) {
    std::string n = dtype_name(d);
    tensors.emplace_back(n + ".matrix", sample(d, {3, 5}));
    tensors.emplace_back(n + ".scalar", sample(d, {}));
    tensors.emplace_back(n + ".empty", sample(d, {0, 4}));
    tensors.emplace_back(n + ".rank4", sample(d, {2, 1, 3, 2}));
  }
  // A strided view is written as its logical (row-major) contents.
  Tensor base = sample(DType::f32, {4, 6});
  tensors.emplace_back("transposed", base.t());
  std::string path = dir / "all.safetensors";
  save_safetensors(path, tensors, {{"format", "pt"}, {"note", "kiln test"}});
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));

  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "kiln test");
  ASSERT_EQ(f.entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const SafetensorsEntry& e = f.entry(name);
    EXPECT_EQ(e.dtype, t.dtype());
    EXPECT_EQ(e.shape, t.shape());
    Tensor back = f.get(name);
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(raw(back), raw(t.contiguous()));
    EXPECT_EQ(f.bytes(name).size(), raw(t.contiguous()).size());
  }
  EXPECT_EQ(f.get("transposed").to_vector<float>(), base.t().contiguous().to_vector<float>());
  EXPECT_EQ(safetensors_dtype_name(DType::bf16), std::string("BF16"));
  EXPECT_EQ(safetensors_dtype_name(DType::b8), std::string("BOOL"));
}

TEST(Safetensors, HeaderIsPaddedAndDataIsAligned) {
  TempDir dir;
  std::string path = dir / "a.safetensors";
  save_safetensors(path, {{"x", sample(DType::f32, {3})}});
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);
  EXPECT_EQ(fs::file_size(path), 8 + len + 12);
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Written independently of the writer: two f32 values and one i64.
  TempDir dir;
  std::string data(16, '\0');
  float xs[2] = {1.5f, -2.0f};
  int64_t y = -7;
  std::memcpy(data.data(), xs, 8);
  std::memcpy(data.data() + 8, &y, 8);
  std::string header =
      R"({"y":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
      R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}  )";
  write_raw(dir / "h.safetensors", header, data);
  SafetensorsFile f(dir / "h.safetensors");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"x", "y"}));  // data order
  EXPECT_EQ(f.get("x").to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f.get("y").to_vector<int64_t>(), (std::vector<int64_t>{-7}));
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_TRUE(f.has("x"));
  EXPECT_FALSE(f.has("z"));
}

TEST(Safetensors, EmptyFileIsValid) {
  TempDir dir;
  save_safetensors(dir / "e.safetensors", NamedTensors{});
  SafetensorsFile f(dir / "e.safetensors");
  EXPECT_TRUE(f.entries().empty());
}

// --- Bad inputs: each a clear error naming the file (and tensor). ---

class BadSafetensors : public ::testing::Test {
 protected:
  TempDir dir;
  std::string path = dir / "bad.safetensors";
  void expect_bad(const std::string& header, const std::string& data,
                  std::initializer_list<std::string> parts) {
    write_raw(path, header, data);
    std::vector<std::string> all(parts);
    all.push_back(path);
    try {
      SafetensorsFile f(path);
      ADD_FAILURE() << "no error for header " << header;
    } catch (const Error& e) {
      for (const std::string& p : all)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "'" << p << "' not in: " << e.what();
    }
  }
};

TEST_F(BadSafetensors, MissingFile) {
  expect_error([&] { SafetensorsFile f(dir / "nope.safetensors"); },
               {"cannot open", "nope.safetensors"});
}

TEST_F(BadSafetensors, FileShorterThanTheLength) {
  std::ofstream(path, std::ios::binary) << "abc";
  expect_error([&] { SafetensorsFile f(path); }, {path, "truncated"});
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  expect_error([&] { SafetensorsFile f(path); }, {path, "truncated"});
}

TEST_F(BadSafetensors, TruncatedDataSection) {
  save_safetensors(path, {{"a", sample(DType::f32, {4})}, {"b", sample(DType::f64, {8})}});
  fs::resize_file(path, fs::file_size(path) - 5);
  expect_error([&] { SafetensorsFile f(path); }, {path, "tensor 'b'", "truncated"});
}

TEST_F(BadSafetensors, HeaderLengthPastTheFile) {
  std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_raw(path, h, "abcd", h.size() + 5);
  expect_error([&] { SafetensorsFile f(path); }, {path, "runs past the end of the file"});
  write_raw(path, h, "abcd", ~uint64_t(0));  // would wrap a naive 8 + len
  expect_error([&] { SafetensorsFile f(path); }, {path, "runs past the end of the file"});
}

TEST_F(BadSafetensors, HeaderOverTheSizeLimit) {
  // A sparse file large enough to hold a 100 MB header.
  {
    std::ofstream f(path, std::ios::binary);
    uint64_t len = kSafetensorsMaxHeaderBytes;
    f.write(reinterpret_cast<const char*>(&len), 8);
  }
  fs::resize_file(path, 8 + kSafetensorsMaxHeaderBytes + 8);
  expect_error([&] { SafetensorsFile f(path); }, {path, "exceeds the limit"});
}

TEST_F(BadSafetensors, MalformedJson) {
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", "abcd",
             {"not valid JSON"});
  expect_bad(R"({"a":{"dtype":"F32"} garbage)", "", {"not valid JSON"});
  expect_bad(R"([1, 2])", "", {"JSON object"});
  expect_bad("", "", {"JSON object"});
  expect_bad("{\"a\xff\":1}", "", {"not valid JSON"});  // invalid UTF-8
}

TEST_F(BadSafetensors, DuplicateNames) {
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             "abcdefgh", {"repeats key 'a'"});
}

TEST_F(BadSafetensors, WrongDtypeString) {
  expect_bad(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "unknown dtype 'F33'", "F32, BF16"});
  expect_bad(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "unsupported dtype 'U8'"});
  expect_bad(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "'dtype' must be a string"});
}

TEST_F(BadSafetensors, MissingOrMalformedFields) {
  expect_bad(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd", {"tensor 'w'", "'data_offsets'"});
  expect_bad(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "abcd", {"tensor 'w'", "'dtype'"});
  expect_bad(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd", {"tensor 'w'", "'shape'"});
  expect_bad(R"({"w":[1,2]})", "", {"tensor 'w'", "must be an object"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd",
             {"tensor 'w'", "data_offsets"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", "abcd",
             {"tensor 'w'", "data_offsets"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd",
             {"tensor 'w'", "end before they begin"});
  expect_bad(R"({"__metadata__":{"k":1}})", "", {"__metadata__", "must be a string"});
  expect_bad(R"({"__metadata__":[1]})", "", {"__metadata__", "object"});
}

TEST_F(BadSafetensors, BadShapes) {
  expect_bad(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "non-negative integers"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "non-negative integers"});
  expect_bad(R"({"w":{"dtype":"F32","shape":{"a":1},"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "array"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "rank 9"});
  // Products that overflow 64 bits must not wrap around to a small size.
  expect_bad(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "",
             {"tensor 'w'", "too large"});
  expect_bad(R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", "",
             {"tensor 'w'", "too large"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})", "",
             {"tensor 'w'", "non-negative integers"});
}

TEST_F(BadSafetensors, DeeplyNestedValues) {
  // Rendering such a value recursively for the message would overflow the stack.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  expect_bad(R"({"w":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "non-negative integers"});
  expect_bad(R"({"w":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "an array of 1 elements"});
  expect_bad(R"({"__metadata__":{"k":)" + deep + "}}", "", {"__metadata__"});
}

TEST_F(BadSafetensors, OffsetsOutOfRange) {
  expect_bad(R"({"w":{"dtype":"F32","shape":[250],"data_offsets":[0,1000]}})", "abcd",
             {"tensor 'w'", "past the end of the data section"});
  expect_bad(R"({"w":{"dtype":"F32","shape":[1],)"
             R"("data_offsets":[18446744073709551612,18446744073709551615]}})",
             "abcd", {"tensor 'w'"});
}

TEST_F(BadSafetensors, ShapeAndSizeDisagree) {
  expect_bad(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "abcdefgh",
             {"tensor 'w'", "hold 8 bytes", "needs 12"});
  expect_bad(R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,4]}})", "abcd",
             {"tensor 'w'", "needs 8"});
}

TEST_F(BadSafetensors, OverlappingRanges) {
  expect_bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             "abcdefghijkl", {"tensor 'b'", "overlap", "tensor 'a'"});
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
             "abcd", {"overlap"});
}

TEST_F(BadSafetensors, HolesAndTrailingBytes) {
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             "abcdefghijkl", {"tensor 'b'", "belong to no tensor"});
  expect_bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcdefgh",
             {"data section has 8 bytes", "cover only 4"});
}

TEST_F(BadSafetensors, BoolValuesOtherThanZeroOrOne) {
  write_raw(path, R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
            std::string("\x01\x00\x02", 3));
  SafetensorsFile f(path);
  expect_error([&] { f.get("m"); }, {path, "tensor 'm'", "not 0 or 1"});
}

TEST_F(BadSafetensors, UnknownTensorName) {
  save_safetensors(path, {{"a", sample(DType::f32, {1})}});
  SafetensorsFile f(path);
  expect_error([&] { f.get("b"); }, {path, "no tensor named 'b'"});
}

// Every single-byte corruption of a small file's first bytes (length and
// header) and every truncation either still reads as a valid file or is a
// kiln::Error; reading every tensor of a file that passed validation stays
// inside it. (Run under the ASan build to catch over-reads.)
TEST_F(BadSafetensors, CorruptionsAreErrorsNeverCrashes) {
  save_safetensors(path,
                   {{"a", sample(DType::f32, {2, 3})},
                    {"b", sample(DType::b8, {5})},
                    {"c", sample(DType::bf16, {4})}},
                   {{"k", "v"}});
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), {});
  uint64_t header_len;
  std::memcpy(&header_len, good.data(), 8);
  auto try_read = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    try {
      SafetensorsFile f(path);
      for (const SafetensorsEntry& e : f.entries()) {
        try {
          f.get(e.name);
        } catch (const Error&) {  // e.g. a BOOL byte that is not 0 or 1
        }
      }
      return true;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      return false;
    }
  };
  int rejected = 0, tried = 0;
  for (size_t i = 0; i < 8 + header_len; ++i) {
    for (uint8_t v : {uint8_t(0), uint8_t(0xff), uint8_t('9'), uint8_t('"'), uint8_t('}'),
                      uint8_t(good[i] ^ 1)}) {
      if (uint8_t(good[i]) == v) continue;
      std::string bad = good;
      bad[i] = char(v);
      rejected += !try_read(bad);
      ++tried;
    }
  }
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(try_read(good.substr(0, n))) << n;
  EXPECT_GT(rejected, tried / 2);  // most corruptions are caught by validation
}

TEST(SafetensorsWriter, RejectsBadNamesAndPaths) {
  TempDir dir;
  Tensor x = sample(DType::f32, {2});
  expect_error([&] { save_safetensors(dir / "a", {{"x", x}, {"x", x}}); }, {"appears twice"});
  expect_error(
      [&] {
        save_safetensors(dir / "a", {{"__metadata__", x}});
      },
      {"invalid tensor name"});
  expect_error([&] { save_safetensors(dir / "a", {{"", x}}); }, {"invalid tensor name"});
  expect_error([&] { save_safetensors(dir / "a", {{"u", Tensor()}}); }, {"undefined"});
  expect_error(
      [&] {
        save_safetensors(dir.path() + "/no/such/dir/a.safetensors", {{"x", x}});
      },
      {"cannot write", "no/such/dir/a.safetensors"});
  EXPECT_TRUE(fs::is_empty(dir.path()));  // nothing half-written is left behind
}

TEST(SafetensorsWriter, ReplacesAnExistingFile) {
  TempDir dir;
  std::string path = dir / "w.safetensors";
  save_safetensors(path, {{"x", sample(DType::f32, {2})}});
  save_safetensors(path, {{"y", sample(DType::i32, {3})}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), std::vector<std::string>{"y"});
}

TEST(AtomicFile, UncommittedWritesLeaveNothing) {
  TempDir dir;
  std::string path = dir / "f.txt";
  write_file_atomic(path, "old");
  {
    AtomicFile f(path);
    f.write("new contents");
  }  // destroyed without commit
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(s, "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(AtomicDir, PublishesAndReplacesWhole) {
  TempDir dir;
  std::string path = dir / "model";
  {
    AtomicDir d(path);
    write_file_atomic(d.temp_path() + "/a", "1");
    write_file_atomic(d.temp_path() + "/b", "2");
    EXPECT_FALSE(fs::exists(path));
    d.commit();
  }
  EXPECT_TRUE(fs::exists(path + "/a"));
  {
    AtomicDir d(path + "/");  // a trailing slash names the same directory
    write_file_atomic(d.temp_path() + "/c", "3");
    d.commit();
  }
  EXPECT_FALSE(fs::exists(path + "/a"));
  EXPECT_TRUE(fs::exists(path + "/c"));
  {
    AtomicDir d(path);
    write_file_atomic(d.temp_path() + "/d", "4");
  }  // abandoned: the published version stays, the temporary one goes
  EXPECT_TRUE(fs::exists(path + "/c"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(AtomicDir, RemovesWholeOrNotAtAll) {
  TempDir dir;
  std::string path = dir / "model";
  write_file_atomic(dir / "model/a", "1");
  remove_dir_atomic(path + "/");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no temporary left either
  remove_dir_atomic(path);                // absent: nothing to do
  write_file_atomic(dir / "file", "x");
  EXPECT_THROW(remove_dir_atomic(dir.path() + "/file/sub"), Error);  // not a directory path
}

}  // namespace
}  // namespace kiln
