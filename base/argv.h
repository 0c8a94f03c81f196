// argv and envp for execve and posix_spawn, from strings.
#pragma once

#include <string>
#include <vector>

namespace barge {

// Pointers to each of `words` (which must outlive the result, unchanged),
// then a null pointer: what execve and posix_spawn take as argv or envp.
inline std::vector<char*> NullTerminated(std::vector<std::string>& words) {
  std::vector<char*> out;
  out.reserve(words.size() + 1);
  for (std::string& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace barge
