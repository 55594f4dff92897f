// The 2026-12-07 security review's bounds, approached from more than one direction on a
// real coordinator process (issue 51): a connection is authenticated only by a token
// that matches (A1), connections are capped per peer whatever they send (A1), an answer
// is bounded by its bytes as encoded and held against its kind's cap until written (A3),
// a worker's host and scrape address cannot carry what the review planted, the CLI's
// output and failure lines escape control characters, and a line a peer can cause is
// logged once per 10 s per listener (A13).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "protocol/frame_codec.h"
#include "tests/integration/raw_connection.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
using testing::RawConnection;
using testing::WaitFor;

// A connection from a loopback address of our choosing (127.0.0.2 is another peer to
// the coordinator than 127.0.0.1).
class ConnectionFrom {
 public:
  // `receive_buffer` > 0: the socket's receive buffer, set before connecting.
  ConnectionFrom(const char* source, int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (receive_buffer > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source, &local.sin_addr);
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_port = htons(static_cast<uint16_t>(port));
    remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0 &&
                 connect(fd_, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) == 0;
  }
  ~ConnectionFrom() { close(fd_); }
  bool connected() const { return connected_; }
  void Send(const std::string& bytes) { (void)!send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  void CloseWrite() { shutdown(fd_, SHUT_WR); }
  // Sends a keep-alive request and returns the first bytes of its answer ("" when the
  // connection was closed unanswered).
  std::string Ask(const std::string& request) {
    (void)!send(fd_, request.data(), request.size(), MSG_NOSIGNAL);
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string Get(const std::string& path, const std::string& authorization = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" +
         (authorization.empty() ? "" : "Authorization: " + authorization + "\r\n") + "\r\n";
}

bool Is200(const std::string& answer) { return answer.rfind("HTTP/1.1 200", 0) == 0; }

class BoundsByMechanismTest : public testing::ClusterTest {
 protected:
  BoundsByMechanismTest() : ClusterTest("bakeoff-bounds-mechanism") {}
  void TearDown() override {
    ExpectCoordinatorAlive();
    ClusterTest::TearDown();
  }
  bool Start(std::vector<std::string> args = {}) {
    std::ofstream(dir_ / "read-token") << "reader\n";
    args.insert(args.end(), {"--read-token-file", (dir_ / "read-token").string()});
    return cluster_->StartCoordinator(args);
  }
};

// A1: any Authorization header on /healthz once marked a connection authenticated and
// never shut down to make room: 260 such connections locked out the whole API. Neither a
// wrong token nor a token of another role (the worker credential, which is no API
// token) authenticates now: at the cap, those connections make room for a probe.
TEST_F(BoundsByMechanismTest, OnlyAMatchingTokenAuthenticatesAConnection) {
  ASSERT_TRUE(Start({"--max-http-connections", "8"}));
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawConnection>(cluster_->http_port()));
    const std::string token = i % 2 == 0 ? "Bearer not-a-token"
                                         : std::string("Bearer ") + testing::TestCluster::kWorkerToken;
    held.back()->Write(Get("/healthz", token));
    ASSERT_TRUE(Is200(held.back()->ReadSome())) << i;  // an open route answers anyone
  }
  for (int probe = 0; probe < 3; ++probe) {
    RawConnection next(cluster_->http_port());
    next.Write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    bool closed = false;
    EXPECT_TRUE(Is200(next.ReadUntilClosed(&closed))) << "probe " << probe << " was locked out";
  }
  // The same header with a matching token does authenticate: eight of those hold the cap.
  held.clear();
  std::vector<std::unique_ptr<RawConnection>> readers;
  for (int i = 0; i < 8; ++i) {
    readers.push_back(std::make_unique<RawConnection>(cluster_->http_port()));
    readers.back()->Write(Get("/healthz", "Bearer reader"));
    ASSERT_TRUE(Is200(readers.back()->ReadSome())) << i;
  }
  RawConnection extra(cluster_->http_port());
  extra.Write(Get("/healthz"));
  bool closed = false;
  EXPECT_EQ(extra.ReadUntilClosed(&closed), "") << "the ninth was served past eight authenticated ones";
}

// A1 from the other side: whatever a peer sends, valid tokens included, it holds at most
// 64 connections (kMaxHttpConnectionsPerPeer); the 65th from its address is closed
// unanswered while another address (127.0.0.2) is served, and it is served again once
// one of its own ends.
TEST_F(BoundsByMechanismTest, ConnectionsArePerPeerCappedWhateverTheySend) {
  ASSERT_TRUE(Start());
  std::vector<std::unique_ptr<ConnectionFrom>> mine;
  for (int i = 0; i < 64; ++i) {
    mine.push_back(std::make_unique<ConnectionFrom>("127.0.0.1", cluster_->http_port()));
    ASSERT_TRUE(mine.back()->connected());
    ASSERT_TRUE(Is200(mine.back()->Ask(Get("/api/v1/workers", "Bearer reader")))) << i;
  }
  {
    ConnectionFrom one_more("127.0.0.1", cluster_->http_port());
    EXPECT_EQ(one_more.Ask(Get("/api/v1/workers", "Bearer reader")), "") << "the 65th of one address was served";
  }
  ConnectionFrom other("127.0.0.2", cluster_->http_port());
  ASSERT_TRUE(other.connected());
  EXPECT_TRUE(Is200(other.Ask(Get("/healthz")))) << "another address is not held back";
  mine.pop_back();
  EXPECT_TRUE(WaitFor([&] {
    ConnectionFrom again("127.0.0.1", cluster_->http_port());
    return Is200(again.Ask(Get("/healthz")));
  }, 10s)) << "served again once one of its connections ended";
}

// A3: a 161-byte query answered 100 MB: each NUL of 4 MB columns became \u0000. The
// bound is on the answer as encoded, from two directions: wide values of escaped bytes,
// and many rows of small values.
TEST_F(BoundsByMechanismTest, AnAnswerIsBoundByItsEncodedBytes) {
  ASSERT_TRUE(Start());
  constexpr std::size_t kBound = 16u << 20;
  std::string sql = "SELECT ";
  for (int i = 0; i < 4; ++i) sql += std::string(i ? ", " : "") + "CAST(zeroblob(4194000) AS TEXT) AS c" + std::to_string(i);
  auto wide = cluster_->client().Post("/api/v1/query", json{{"sql", sql}}.dump(), "application/json");
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_LE(wide->body.size(), kBound + 4096) << "status " << wide->status;
  if (wide->status == 200) {
    EXPECT_EQ(json::parse(wide->body)["truncated"], true);
  }
  // 10,000 rows (the row cap) of 300 NULs each: 3 MB as stored, 18 MB as sent.
  auto rows = cluster_->client().Post(
      "/api/v1/query",
      json{{"sql", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) "
                   "SELECT CAST(zeroblob(300) AS TEXT) || i FROM n"}}
          .dump(),
      "application/json");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->status, 200) << rows->body.substr(0, 300);
  EXPECT_LE(rows->body.size(), kBound + 4096);
  EXPECT_EQ(json::parse(rows->body)["truncated"], true);
}

// A3: each answer was held up to 30 s for a client that never read it, while its
// query's slot was already free: 60 unread answers of 100 MB OOM-killed the coordinator.
// The slot is held until the answer is written: with two answers unread, a third query
// is refused at once (503), and once the readers go it runs again.
TEST_F(BoundsByMechanismTest, AnUnreadAnswerHoldsItsQuerySlotUntilWritten) {
  ASSERT_TRUE(Start());
  const std::string big =
      json{{"sql", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
                   "SELECT CAST(zeroblob(1000000) AS TEXT) FROM n"}}
          .dump();
  const std::string request = "POST /api/v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer reader\r\n"
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(big.size()) + "\r\n\r\n" + big;
  std::vector<std::unique_ptr<ConnectionFrom>> unread;
  for (int i = 0; i < 2; ++i) {
    // A small receive buffer: most of the 6 MB answer waits in the coordinator.
    unread.push_back(std::make_unique<ConnectionFrom>("127.0.0.1", cluster_->http_port(), 4096));
    ASSERT_TRUE(unread.back()->connected());
    unread.back()->Send(request);
  }
  auto third_status = [&] {
    auto third = cluster_->client().Post("/api/v1/query", json{{"sql", "SELECT 1"}}.dump(), "application/json");
    return third.ok() ? third->status : 0;
  };
  ASSERT_TRUE(WaitFor([&] { return third_status() == 503; }, 10s)) << "the two big queries never held the slots";
  // Held while the answers wait unread, long after the queries themselves ended (well
  // under a second): every probe for 3 s is refused.
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(third_status(), 503) << "probe " << i << ": a third query ran while two answers waited unread";
    std::this_thread::sleep_for(200ms);
  }
  unread.clear();
  EXPECT_TRUE(WaitFor([&] {
    auto after = cluster_->client().Post("/api/v1/query", json{{"sql", "SELECT 1"}}.dump(), "application/json");
    return after.ok() && after->status == 200;
  }, 40s)) << "the slots came back once the unread answers ended";
}

// A13: a worker's host is printed by `bakeoff workers` and logged: one carrying terminal
// escapes is refused, as is one that is not a host at all; /api/v1/sd publishes the
// connection's own address, never one the worker names (internal and metadata
// addresses were published).
TEST_F(BoundsByMechanismTest, AWorkersHostIsValidatedAndDiscoveryPublishesOnlyItsConnection) {
  ASSERT_TRUE(Start());
  for (const std::string& host : {std::string("h\x1b]0;OWNED\x07"), std::string("a b"), std::string(300, 'h')}) {
    json reg = testing::RegisterMessage("escaped");
    reg.erase("running");
    reg["host"] = host;
    RawConnection worker(cluster_->worker_port());
    worker.Write(*protocol::EncodeFrame(reg));
    bool closed = false;
    const std::string reply = worker.ReadUntilClosed(&closed);
    EXPECT_NE(reply.find("invalid host"), std::string::npos) << reply;
  }
  int n = 0;
  for (const std::string named : {"10.0.0.7", "100.100.100.200", "168.63.129.16"}) {
    json reg = testing::RegisterMessage("sd-" + std::to_string(++n));
    reg.erase("running");
    reg["metrics_port"] = 9400;
    reg["metrics_host"] = named;
    RawConnection worker(cluster_->worker_port());
    worker.Write(*protocol::EncodeFrame(reg));
    ASSERT_NE(worker.ReadSome().find("registered"), std::string::npos) << named;
    auto sd = cluster_->client().GetJson("/api/v1/sd");
    ASSERT_TRUE(sd.ok()) << sd.status().ToString();
    EXPECT_EQ(sd->dump().find(named), std::string::npos) << sd->dump();
    EXPECT_NE(sd->dump().find("127.0.0.1:9400"), std::string::npos) << sd->dump();
  }
}

// The command's stdout and stderr together.
std::string RunShell(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen((command + " 2>&1").c_str(), "r")) {
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
    pclose(pipe);
  }
  return out;
}

// A13: what a trainer, a worker or a coordinator wrote reached the operator's terminal
// raw (`status`, `report`, `workers`). Every command's output goes through one writer
// that escapes control characters: a stored value with a terminal escape, as a table and
// as CSV, and (the other way in) a coordinator's error message quoting the SQL it
// refused, which the CLI prints to stderr.
TEST_F(BoundsByMechanismTest, CliOutputEscapesControlCharacters) {
  ASSERT_TRUE(Start());
  const std::string bakeoff = std::string(BAKEOFF_BINARY_DIR) + "/bakeoff";
  for (const std::string format : {"table", "csv", "json"}) {
    const std::string out = RunShell(bakeoff + " query --db " + cluster_->db() + " --format " + format +
                                     " \"SELECT char(27) || ']0;OWNED' || char(7) || char(155) || '<b>' AS c\"");
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << format << ": " << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << format << ": " << out;
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << format << ": " << out;
    EXPECT_NE(out.find("]0;OWNED"), std::string::npos) << format << ": " << out;
  }
  const std::string table = RunShell(bakeoff + " query --db " + cluster_->db() +
                                     " \"SELECT char(27) || ']0;OWNED' || char(7) || char(155) AS c\"");
  EXPECT_NE(table.find("\\x1b]0;OWNED\\x07\\u009b"), std::string::npos) << table;
  const std::string refused = RunShell("BAKEOFF_TOKEN=cluster-secret " + bakeoff + " query --coordinator " +
                                       cluster_->url() + " \"$(printf 'SELEC\\033]0;OWNED\\007T 1')\"");
  EXPECT_NE(refused.find("OWNED"), std::string::npos) << refused;
  EXPECT_EQ(refused.find('\x1b'), std::string::npos) << refused;
  EXPECT_EQ(refused.find('\x07'), std::string::npos) << refused;
}

// Opens a connection from `source` to `port`, sends `bytes`, half-closes, and waits until
// the server closes its side: the server has then handled (and logged) the connection.
void ConnectSendAndWaitForClose(const char* source, int port, const std::string& bytes = "") {
  ConnectionFrom c(source, port);
  ASSERT_TRUE(c.connected());
  c.Send(bytes);
  c.CloseWrite();
  EXPECT_EQ(c.Ask(""), "");
}

std::size_t CountOf(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A13: silent worker connections wrote 21 MB of log in 40 s. A line a peer can cause is
// written at most once per 10 s per listener, the next one saying how many were left out:
// 300 worker connections that end before registering, silent or (the other way in)
// announcing a frame over the unauthenticated limit, write one or two lines; so do 150 HTTP connections
// over their address's cap, on the other listener, whose first line the worker flood did
// not take.
TEST_F(BoundsByMechanismTest, PeerTriggeredLogLinesAreWrittenOncePer10Seconds) {
  ASSERT_TRUE(Start());
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) {
    ConnectSendAndWaitForClose("127.0.0.1", cluster_->worker_port(), i % 2 ? std::string("\x7f\xff\xff\xff", 4) : "");
  }
  std::vector<std::unique_ptr<ConnectionFrom>> held;
  for (int i = 0; i < 64; ++i) {
    held.push_back(std::make_unique<ConnectionFrom>("127.0.0.4", cluster_->http_port()));
    ASSERT_TRUE(Is200(held.back()->Ask(Get("/api/v1/workers", "Bearer reader")))) << i;
  }
  for (int i = 0; i < 150; ++i) {
    ConnectionFrom over("127.0.0.4", cluster_->http_port());
    EXPECT_EQ(over.Ask(Get("/healthz")), "") << i;
  }
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::size_t allowed = 1 + static_cast<std::size_t>(elapsed_s / 10) + 1;
  std::string log = testing::ReadFile(cluster_->CoordinatorLog());
  EXPECT_GE(CountOf(log, "ended before registering"), 1u) << log;
  EXPECT_LE(CountOf(log, "ended before registering"), allowed) << log;
  EXPECT_GE(CountOf(log, "peer=127.0.0.4"), 1u) << log;
  EXPECT_LE(CountOf(log, "peer=127.0.0.4"), allowed) << log;
  // After the interval, the next such line counts those left out.
  ASSERT_TRUE(WaitFor([&] {
    ConnectSendAndWaitForClose("127.0.0.1", cluster_->worker_port());
    log = testing::ReadFile(cluster_->CoordinatorLog());
    return log.find("ended before registering") != log.rfind("ended before registering");
  }, 30s)) << log;
  const std::size_t last = log.rfind("ended before registering");
  const std::size_t count_at = log.find(" left_out=", last);
  ASSERT_NE(count_at, std::string::npos) << log.substr(last);
  EXPECT_GE(std::stoul(log.substr(count_at + std::string(" left_out=").size())), 290u) << log.substr(last);
}

// A13, the local side: `bakeoff query --db` (no coordinator) printed SQLite's error
// message raw, and it quotes the SQL and the database's path. Every failure line goes
// through the same escape as the output (cli/exit_codes.h, PrintFailure): an error
// quoting a table name, and one naming a database path, each with a terminal escape.
TEST_F(BoundsByMechanismTest, LocalDatabaseQueryErrorsAreEscaped) {
  ASSERT_TRUE(Start());
  const std::string bakeoff = std::string(BAKEOFF_BINARY_DIR) + "/bakeoff";
  const std::string no_table = RunShell(bakeoff + " query --db " + cluster_->db() +
                                        " \"SELECT 1 FROM \\\"$(printf 'x\\033]0;OWNED\\007\\302\\233')\\\"\"");
  const std::string missing = RunShell(bakeoff + " query --db \"" + (dir_ / "").string() +
                                       "$(printf 'gone\\033]0;OWNED\\007.db')\" \"SELECT 1\"");
  for (const std::string& out : {no_table, missing}) {
    EXPECT_NE(out.find("bakeoff query: "), std::string::npos) << out;
    EXPECT_NE(out.find("\\x1b]0;OWNED\\x07"), std::string::npos) << out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
  }
  EXPECT_NE(no_table.find("\\u009b"), std::string::npos) << no_table;
  EXPECT_NE(no_table.find("no such table"), std::string::npos) << no_table;
}

}  // namespace
}  // namespace bakeoff
