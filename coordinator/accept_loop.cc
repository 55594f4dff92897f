#include "coordinator/accept_loop.h"

#include <cerrno>
#include <cstdio>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "protocol/backoff.h"

namespace bakeoff::coordinator {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

void Log(const std::string& line) { fprintf(stderr, "bakeoff coordinator: %s\n", line.c_str()); }

// Failures that pass once resources free up: wait instead of retrying at once.
bool OutOfResources(const boost::system::error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  const int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

}  // namespace

asio::awaitable<void> AcceptLoop(tcp::acceptor& acceptor, AcceptOptions options,
                                 std::function<void(tcp::socket, ConnectionSlot)> serve) {
  auto open = std::make_shared<std::size_t>(0);
  Backoff backoff({options.backoff_initial, options.backoff_max, 0.2});
  std::size_t failed = 0;   // accepts failed in the current streak
  std::size_t refused = 0;  // connections refused at the cap in the current streak
  while (acceptor.is_open()) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open()) break;
      if (!OutOfResources(ec)) continue;  // e.g. a peer that reset before we accepted
      if (failed++ == 0) {
        Log(options.what + " listener: accept failed (" + ec.message() + ", " + std::to_string(*open) +
            " connections open); backing off up to " + std::to_string(options.backoff_max.count()) + " ms");
      }
      asio::steady_timer timer(acceptor.get_executor(), backoff.Next());
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (failed > 0) {
      Log(options.what + " listener: accepting again after " + std::to_string(failed) + " failed accepts");
      failed = 0;
      backoff.Reset();
    }
    if (*open >= options.max_connections) {
      if (refused++ == 0) {
        Log(options.what + " listener: " + std::to_string(*open) + " connections open, the cap: closing new ones "
            "until some end");
      }
      socket.close(ec);
      continue;
    }
    if (refused > 0) {
      Log(options.what + " listener: under the cap again after refusing " + std::to_string(refused) +
          " connections");
      refused = 0;
    }
    serve(std::move(socket), ConnectionSlot(open));
  }
}

}  // namespace bakeoff::coordinator
