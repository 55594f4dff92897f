// Status and Result<T>: how every Bakeoff component returns an expected failure
// (bad input, a peer gone, a timeout, a full disk) as a value. Bugs are not Statuses:
// they are checks that stop the program. Header-only and dependency-free so that the
// trainer, which must build alone on a GPU machine, can use it too.
// Thread-safety: values; a const Status may be read from any thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace bakeoff {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // the caller's input is wrong: fix the input
    kNotFound,         // a named thing does not exist
    kIoError,          // the file system or a socket failed
    kUnavailable,      // a peer is gone or not ready: retrying may help
    kTimeout,          // a deadline passed
    kResourceExhausted,  // memory, disk or a configured limit
    kUnsupported,      // valid request this build or device cannot run
    kInternal,         // an invariant broke in a library we call
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status IoError(std::string m) { return Status(Code::kIoError, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
  static Status ResourceExhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
  static Status Unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: <message>", or "ok".
  std::string ToString() const {
    return ok() ? std::string("ok") : std::string(CodeName(code_)) + ": " + message_;
  }

  // Returns a copy whose message is "<context>: <message>"; ok stays ok.
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

  static const char* CodeName(Code code) {
    switch (code) {
      case Code::kOk: return "ok";
      case Code::kInvalidArgument: return "invalid argument";
      case Code::kNotFound: return "not found";
      case Code::kIoError: return "io error";
      case Code::kUnavailable: return "unavailable";
      case Code::kTimeout: return "timeout";
      case Code::kResourceExhausted: return "resource exhausted";
      case Code::kUnsupported: return "unsupported";
      case Code::kInternal: return "internal";
    }
    return "unknown";
  }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
// REQUIRES: a Result is never built from an ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  // By value, not T&&: `for (auto& x : Load().value())` would otherwise iterate a
  // temporary that is already destroyed.
  T value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace bakeoff

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define BAKEOFF_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::bakeoff::Status bakeoff_status_ = (expr);  \
    if (!bakeoff_status_.ok()) return bakeoff_status_; \
  } while (0)
