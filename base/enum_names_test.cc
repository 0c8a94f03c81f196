#include "base/enum_names.h"

#include <gtest/gtest.h>

namespace barge {
namespace {

enum class Fruit { kApple, kPear, kPlum };
constexpr auto kFruitNames = std::to_array<EnumName<Fruit>>(
    {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kPlum, "plum"}});
static_assert(ListsEveryValueInOrder(kFruitNames));

TEST(EnumNames, NameAndValueAreEachOthersInverse) {
  EXPECT_EQ(NameOf(kFruitNames, Fruit::kPear), "pear");
  EXPECT_EQ(ValueOf(kFruitNames, "plum"), Fruit::kPlum);
  for (const auto& [value, name] : kFruitNames) {
    EXPECT_EQ(ValueOf(kFruitNames, NameOf(kFruitNames, value)), value) << name;
  }
}

TEST(EnumNames, OtherTextHasNoValueAndCaseCounts) {
  EXPECT_EQ(ValueOf(kFruitNames, "Pear"), std::nullopt);
  EXPECT_EQ(ValueOf(kFruitNames, ""), std::nullopt);
  EXPECT_EQ(ValueOf(kFruitNames, "pear "), std::nullopt);
  EXPECT_EQ(NameOf(kFruitNames, static_cast<Fruit>(7)), "");
}

TEST(EnumNames, NamesKeepTheTablesOrder) {
  constexpr auto names = NamesOf(kFruitNames);
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], "apple");
  EXPECT_EQ(names[2], "plum");
}

TEST(EnumNames, ATableWithAGapARepeatOrAnEmptyNameIsRefused) {
  constexpr auto gap = std::to_array<EnumName<Fruit>>({{Fruit::kApple, "apple"}, {Fruit::kPlum, "plum"}});
  constexpr auto repeat = std::to_array<EnumName<Fruit>>({{Fruit::kApple, "apple"}, {Fruit::kPear, "apple"}});
  constexpr auto empty = std::to_array<EnumName<Fruit>>({{Fruit::kApple, ""}});
  static_assert(!ListsEveryValueInOrder(gap));
  static_assert(!ListsEveryValueInOrder(repeat));
  static_assert(!ListsEveryValueInOrder(empty));
  EXPECT_FALSE(ListsEveryValueInOrder(gap));
}

}  // namespace
}  // namespace barge
