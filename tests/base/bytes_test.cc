#include "kiln/base/bytes.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln {
namespace {

TEST(Bytes, TextUsesBinaryUnits) {
  EXPECT_EQ(bytes_text(0), "0 B");
  EXPECT_EQ(bytes_text(1023), "1023 B");
  EXPECT_EQ(bytes_text(1536), "1.5 KiB");
  EXPECT_EQ(bytes_text(double(3) * (1 << 30), 2), "3.00 GiB");
  EXPECT_EQ(bytes_text(double(int64_t(5) << 40) * 1024), "5120.0 TiB");
}

TEST(Bytes, ParsesNumbersWithBinaryUnits) {
  EXPECT_EQ(parse_bytes("1048576", "X"), 1 << 20);
  EXPECT_EQ(parse_bytes("512K", "X"), 512 << 10);
  EXPECT_EQ(parse_bytes("64 MiB", "X"), int64_t(64) << 20);
  EXPECT_EQ(parse_bytes("5g", "X"), int64_t(5) << 30);
  EXPECT_EQ(parse_bytes("2.5GB", "X"), int64_t(5) << 29);
  EXPECT_EQ(parse_bytes("1T", "X"), int64_t(1) << 40);
  EXPECT_EQ(parse_bytes("7b", "X"), 7);
  EXPECT_EQ(parse_bytes("0", "X"), 0);
}

TEST(Bytes, RefusesWhatIsNotASizeNamingTheSetting) {
  for (const char* bad : {"", "G", "-5G", "5X", "5ib", "5GiBs", "1.5", "inf", "5 G G", "1e30T"}) {
    try {
      parse_bytes(bad, "KILN_CACHE_MAX_SIZE");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("KILN_CACHE_MAX_SIZE='") + bad + "' is not a size"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
