// An environment variable set or unset for one scope (a test), and put back
// as it was at the scope's end. Not thread-safe, as setenv is not.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace barge::testing {

class ScopedEnv {
 public:
  // `value` nullopt: unset for the scope.
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace barge::testing
