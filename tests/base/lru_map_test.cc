#include "kiln/base/lru_map.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

TEST(LruMap, PastItsBoundTheEntryUsedLongestAgoLeaves) {
  LruMap<std::string, int> m(10);
  m.insert("a", 1, 4);
  m.insert("b", 2, 4);
  EXPECT_EQ(m.weight(), 8);
  ASSERT_NE(m.find("a"), nullptr);  // b is now the oldest
  m.insert("c", 3, 4);
  EXPECT_FALSE(m.contains("b"));
  EXPECT_EQ(*m.find("a"), 1);
  EXPECT_EQ(*m.find("c"), 3);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.weight(), 8);
  EXPECT_EQ(m.find("b"), nullptr);
}

TEST(LruMap, ReplacingAnEntryReweighsIt) {
  LruMap<std::string, int> m(10);
  m.insert("a", 1, 4);
  m.insert("b", 2, 4);
  m.insert("a", 5, 1);  // a is newest now, and lighter
  EXPECT_EQ(m.weight(), 5);
  m.insert("c", 3, 5);  // 10 in all: nothing leaves
  EXPECT_EQ(m.size(), 3u);
  m.insert("d", 4, 1);  // b, the oldest, leaves
  EXPECT_FALSE(m.contains("b"));
  EXPECT_EQ(*m.find("a"), 5);
  EXPECT_EQ(m.weight(), 7);
}

TEST(LruMap, AnEntryHeavierThanTheBoundStaysAloneUntilTheNext) {
  LruMap<std::string, int> m(10);
  m.insert("a", 1, 3);
  int& big = m.insert("big", 2, 50);
  EXPECT_EQ(big, 2);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.weight(), 50);
  m.insert("c", 3, 3);
  EXPECT_FALSE(m.contains("big"));
  EXPECT_EQ(m.weight(), 3);
  m.clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.weight(), 0);
  EXPECT_FALSE(m.contains("c"));
}

}  // namespace
}  // namespace kiln
