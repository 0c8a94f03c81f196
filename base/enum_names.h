// Enum names: one table per enum maps each value to the name a job file,
// the command line or the store spells it with; both directions read it.
//
//   enum class Color { kRed, kBlue };
//   inline constexpr auto kColorNames =
//       std::to_array<EnumName<Color>>({{Color::kRed, "red"}, {Color::kBlue, "blue"}});
//   static_assert(ListsEveryValueInOrder(kColorNames));
//   NameOf(kColorNames, Color::kBlue) == "blue";  ValueOf(kColorNames, "red") == kRed
//   inline constexpr auto kColorChoices = NamesOf(kColorNames);  // a job key's choices
//
// Names are string literals: name.data() is NUL-terminated.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace barge {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
using EnumTable = std::array<EnumName<E>, N>;

// True when the table holds the values 0..N-1 in order, each once, with
// distinct non-empty names: for an enum whose values count from 0, every
// value is named and NameOf never comes back empty.
template <typename E, size_t N>
constexpr bool ListsEveryValueInOrder(const EnumTable<E, N>& table) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) != i || table[i].name.empty()) return false;
    for (size_t j = 0; j < i; ++j) {
      if (table[j].name == table[i].name) return false;
    }
  }
  return true;
}

// The value's name; empty for a value the table lacks.
template <typename E, size_t N>
constexpr std::string_view NameOf(const EnumTable<E, N>& table, E value) {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return {};
}

// The value named `name` (exactly, case and all); nullopt for any other text.
template <typename E, size_t N>
constexpr std::optional<E> ValueOf(const EnumTable<E, N>& table, std::string_view name) {
  for (const EnumName<E>& e : table) {
    if (e.name == name) return e.value;
  }
  return std::nullopt;
}

// The names in the table's order (a job key's `choices`, a list of
// accepted values in a message).
template <typename E, size_t N>
constexpr std::array<std::string_view, N> NamesOf(const EnumTable<E, N>& table) {
  std::array<std::string_view, N> names{};
  for (size_t i = 0; i < N; ++i) names[i] = table[i].name;
  return names;
}

}  // namespace barge
