// Issue 31 over real HTTP: a coordinator with tokens serves its page and the page's files
// without one, with a Content-Security-Policy that allows only its own script, style and
// API (so a value planted in a sweep cannot run as script even if it reached the markup);
// the API behind the page still needs a token; a wrong method gets an Allow header.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/raw_connection.h"
#include "tests/integration/test_cluster.h"

namespace bakeoff {
namespace {

class WebPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-web");
    cluster_ = std::make_unique<testing::TestCluster>(dir_, std::string(BAKEOFF_BINARY_DIR) + "/bakeoff-fake-trainer");
    ASSERT_TRUE(cluster_->StartCoordinator());
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // The whole reply (headers and body) to one request without a token.
  std::string Get(const std::string& method, const std::string& path) {
    testing::RawConnection c(cluster_->http_port());
    c.Write(method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    bool closed = false;
    return c.ReadUntilClosed(&closed);
  }
  std::filesystem::path dir_;
  std::unique_ptr<testing::TestCluster> cluster_;
};

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(WebPageTest, ThePageAndItsFilesNeedNoTokenAndCarryAPolicyThatRunsOnlyTheirOwnScript) {
  const std::string page = Get("GET", "/");
  EXPECT_EQ(page.rfind("HTTP/1.1 200", 0), 0u) << page;
  EXPECT_TRUE(Has(page, "Content-Type: text/html; charset=utf-8")) << page;
  EXPECT_TRUE(Has(page, "Content-Security-Policy: default-src 'none'; script-src 'self';")) << page;
  EXPECT_TRUE(Has(page, "X-Content-Type-Options: nosniff"));
  EXPECT_TRUE(Has(page, "<script src=\"/ui/app.js\" defer></script>"));
  EXPECT_FALSE(Has(page, "<script>")) << "no inline script: the policy would refuse it";
  const std::string js = Get("GET", "/ui/app.js");
  EXPECT_EQ(js.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_TRUE(Has(js, "Content-Type: text/javascript"));
  EXPECT_FALSE(Has(js, "innerHTML")) << "values reach the page as text, never as markup";
  EXPECT_EQ(Get("GET", "/ui/app.css").rfind("HTTP/1.1 200", 0), 0u);
  const std::string api = Get("GET", "/api/v1/openapi.json");
  EXPECT_EQ(api.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_TRUE(Has(api, "\"openapi\": \"3.0.3\""));
  // The data behind the page is not open: the page sends the token the user typed.
  const std::string sweeps = Get("GET", "/api/v1/sweeps");
  EXPECT_EQ(sweeps.rfind("HTTP/1.1 401", 0), 0u) << sweeps;
  EXPECT_TRUE(Has(sweeps, "WWW-Authenticate: Bearer"));
}

TEST_F(WebPageTest, AWrongMethodOnAKnownPathIs405WithTheMethodsItTakes) {
  const std::string reply = Get("DELETE", "/healthz");
  EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << reply;
  EXPECT_TRUE(Has(reply, "Allow: GET")) << reply;
}

}  // namespace
}  // namespace bakeoff
