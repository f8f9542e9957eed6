// Errors as values. Nothing reachable from user input aborts: functions that can fail on bad
// input return Result<T> (or Status), and callers report the message.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace tangram {

struct Error {
  std::string message;
};

// Builds an Error with fmt-style formatting: return make_error("bad offset {}", off);
template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : e_(std::move(error)) {}  // NOLINT
  static Status Ok() { return {}; }
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }
  const std::string& message() const { return e_->message; }

 private:
  std::optional<Error> e_;
};

// Propagate an error from an expression returning Status or Result<T>.
#define TG_TRY(expr)                               \
  do {                                             \
    auto&& tg_try_r_ = (expr);                     \
    if (!tg_try_r_.ok()) return tg_try_r_.error(); \
  } while (0)

#define TG_CONCAT_INNER_(a, b) a##b
#define TG_CONCAT_(a, b) TG_CONCAT_INNER_(a, b)
// TG_ASSIGN(auto x, f()) declares x from a Result, or returns its error.
#define TG_ASSIGN(decl, expr)                                                                      \
  auto TG_CONCAT_(tg_assign_r_, __LINE__) = (expr);                                                \
  if (!TG_CONCAT_(tg_assign_r_, __LINE__).ok()) return TG_CONCAT_(tg_assign_r_, __LINE__).error(); \
  decl = std::move(TG_CONCAT_(tg_assign_r_, __LINE__)).value()

}  // namespace tangram
