#include "runner/cli/verb_tree.h"

#include <cstdio>

#include "runner/cli/array_cli.h"

namespace barge::runner {

bool FindArrayOrSay(const std::string& state_dir, const std::string& text, std::optional<std::string>* array_id) {
  auto found = FindArray(state_dir, text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return false;
  }
  *array_id = *found;
  return true;
}

}  // namespace barge::runner
