// Issue 31: /api/v1/openapi.json (coordinator/web/openapi.json, built into the binary)
// and the router's table (HttpServer::Routes) list the same routes with the same roles,
// and every path parameter of a route is declared in the document.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <utility>

#include "coordinator/http_server.h"
#include "coordinator/web_assets.h"

namespace bakeoff::coordinator {
namespace {

using nlohmann::json;

json Document() {
  const EmbeddedFile* file = FindEmbeddedFile("openapi.json");
  if (file == nullptr) return json();
  return json::parse(file->body, nullptr, false);
}

std::string RoleName(ApiRole role) {
  switch (role) {
    case ApiRole::kNone: return "none";
    case ApiRole::kRead: return "read";
    case ApiRole::kSubmit: return "submit";
  }
  return "?";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(OpenApiTest, TheDocumentIsOpenApi3JsonBuiltIntoTheBinary) {
  const json doc = Document();
  ASSERT_TRUE(doc.is_object()) << "openapi.json is missing or not JSON";
  EXPECT_EQ(doc.value("openapi", "").rfind("3.0", 0), 0u);
  EXPECT_TRUE(doc["components"]["securitySchemes"].contains("bearer"));
}

TEST(OpenApiTest, TheDocumentAndTheRouterListTheSameRoutesWithTheSameRoles) {
  const json doc = Document();
  ASSERT_TRUE(doc.is_object());
  std::set<std::pair<std::string, std::string>> documented, routed;
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, operation] : item.items()) {
      documented.insert({method, path});
      // The role each route needs is the router's.
      for (const auto& route : HttpServer::Routes()) {
        if (Lower(route.method) == method && route.pattern == path) {
          EXPECT_EQ(operation.value("x-bakeoff-role", ""), RoleName(route.role)) << method << " " << path;
          EXPECT_EQ(operation.contains("security"), route.role != ApiRole::kNone) << method << " " << path;
        }
      }
      // Every {param} of the path is a declared path parameter.
      for (std::size_t at = path.find('{'); at != std::string::npos; at = path.find('{', at + 1)) {
        const std::string name = path.substr(at + 1, path.find('}', at) - at - 1);
        bool declared = false;
        for (const auto& p : operation.value("parameters", json::array())) {
          declared = declared || (p.value("in", "") == "path" && p.value("name", "") == name);
        }
        EXPECT_TRUE(declared) << method << " " << path << ": {" << name << "}";
      }
      EXPECT_TRUE(operation.contains("responses")) << method << " " << path;
    }
  }
  for (const auto& route : HttpServer::Routes()) routed.insert({Lower(route.method), route.pattern});
  for (const auto& r : routed) EXPECT_TRUE(documented.count(r)) << "not in openapi.json: " << r.first << " " << r.second;
  for (const auto& d : documented) EXPECT_TRUE(routed.count(d)) << "no such route: " << d.first << " " << d.second;
}

}  // namespace
}  // namespace bakeoff::coordinator
