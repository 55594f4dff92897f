// RunUntilDone: runs a coroutine on an io_context (whose other work, e.g. test servers,
// keeps running beside it) until the coroutine finishes or `timeout` passes, and
// returns its result. Shared by the protocol tests. Thread-safety: the caller's thread.
#pragma once

#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <chrono>
#include <exception>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace bakeoff::testing {

template <typename T>
boost::asio::awaitable<void> StoreResult(boost::asio::awaitable<T> op, std::optional<T>* out) {
  out->emplace(co_await std::move(op));
}

// T must be constructible from a Status (a Result or a Status).
template <typename T>
T RunUntilDone(boost::asio::io_context& io, boost::asio::awaitable<T> op, std::chrono::milliseconds timeout) {
  using bakeoff::Status;
  std::optional<T> out;
  boost::asio::co_spawn(io, StoreResult(std::move(op), &out), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.restart();  // an earlier run may have stopped it
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!out && std::chrono::steady_clock::now() < deadline) io.run_one_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(out.has_value()) << "operation did not finish within " << timeout.count() << " ms";
  return out ? std::move(*out) : T(Status::Internal("not finished"));
}

}  // namespace bakeoff::testing
