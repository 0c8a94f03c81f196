// Errors as values: Status says whether an operation succeeded and, if not,
// why; Result<T> carries either a T or a failed Status.
//
// Messages are complete sentences for a user ("127.0.0.2: connection refused"),
// built by the layer that knows the most context. Neither type throws.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace barge {

class [[nodiscard]] Status {
 public:
  // A default-constructed Status is success.
  Status() = default;

  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    if (s.message_->empty()) s.message_ = "unknown error";
    return s;
  }

  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }

  // Empty for success.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

  // Returns a copy whose message is "context: message". No-op on success.
  Status Prefixed(const std::string& context) const {
    if (ok()) return *this;
    return Error(context + ": " + *message_);
  }

 private:
  std::optional<std::string> message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  // `status` must not be ok.
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // The error; Status::Ok() when this holds a value.
  Status status() const {
    if (ok()) return Status::Ok();
    return std::get<Status>(v_);
  }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace barge
