// The logging facility: a line's format (UTC timestamp, level, component, key=value),
// escaping of text from outside so that nothing forges a second line, and the sinks
// (a file created 0600, stderr off, the minimum level).
#include "protocol/log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/integration/test_files.h"  // ReadFile

namespace bakeoff::logging {
namespace {

using testing::ReadFile;

// 2026-12-04T18:10:01.123Z
std::chrono::system_clock::time_point At() {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(1796407801123LL));
}

TEST(LogTest, ALineHasTheUtcTimeTheLevelTheComponentAndItsFields) {
  EXPECT_EQ(FormatLine(At(), Level::kInfo, "coordinator", "assigned", {{"trial", "3"}, {"worker", "w1"}}),
            "2026-12-04T18:10:01.123Z INFO  coordinator: assigned trial=3 worker=w1");
  EXPECT_EQ(FormatLine(At(), Level::kWarning, "worker", "cannot send"), "2026-12-04T18:10:01.123Z WARN  worker: cannot send");
  EXPECT_EQ(FormatLine(At(), Level::kError, "c", "m"), "2026-12-04T18:10:01.123Z ERROR c: m");
}

TEST(LogTest, AValueWithASpaceAQuoteOrAnEqualsSignIsQuoted) {
  EXPECT_EQ(FormatLine(At(), Level::kInfo, "c", "m", {{"reason", "port in use"}, {"q", "a\"b"}, {"e", ""}}),
            "2026-12-04T18:10:01.123Z INFO  c: m reason=\"port in use\" q=\"a\\\"b\" e=\"\"");
}

TEST(LogTest, FieldsAreTypedNumbersStayNumbers) {
  EXPECT_EQ(FormatLine(At(), Level::kInfo, "worker", "step", {{"trial", 3}, {"step_s", 0.25}, {"ok", true},
                                                             {"bytes", std::uint64_t{1} << 40}, {"name", "w1"}}),
            "2026-12-04T18:10:01.123Z INFO  worker: step trial=3 step_s=0.25 ok=true bytes=1099511627776 name=w1");
}

// --log-format json: one object per line that a standard tool reads back, numbers as
// numbers, text from outside escaped by JSON, a field named like a line key kept apart.
TEST(LogTest, TheJsonFormIsOneObjectPerLineWithTypedFields) {
  const std::string line =
      FormatLine(At(), Level::kWarning, "coordinator", "lost\nworker", {{"trial", 3}, {"worker", "w\n1\x1b"},
                                                                        {"step_s", 0.5}, {"msg", "mine"}},
                 Format::kJson);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed.at("time"), "2026-12-04T18:10:01.123Z");
  EXPECT_EQ(parsed.at("level"), "warn");
  EXPECT_EQ(parsed.at("component"), "coordinator");
  EXPECT_EQ(parsed.at("msg"), "lost\nworker");
  EXPECT_EQ(parsed.at("trial"), 3);
  EXPECT_EQ(parsed.at("worker"), "w\n1\x1b");
  EXPECT_EQ(parsed.at("step_s"), 0.5);
  EXPECT_EQ(parsed.at("_msg"), "mine");
  EXPECT_EQ(ParseFormat("json"), Format::kJson);
  EXPECT_EQ(ParseFormat("text"), Format::kText);
  EXPECT_FALSE(ParseFormat("xml").has_value());
}

TEST(LogTest, TextFromOutsideCannotForgeASecondLineOrATerminalSequence) {
  const std::string line = FormatLine(At(), Level::kInfo, "coordinator", "name w1\nINFO  coordinator: sweep 1 finished",
                                      {{"name", "x\r\n\x1b[2J"}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_NE(line.find("name w1\\nINFO  coordinator: sweep 1 finished"), std::string::npos) << line;
  EXPECT_NE(line.find("name=x\\r\\n\\x1b[2J"), std::string::npos) << line;
}

TEST(LogTest, LinesGoToTheFileOnlyWhenStderrIsOffAndBelowTheMinimumLevelNowhere) {
  const auto path = std::filesystem::temp_directory_path() / ("bakeoff-log-test-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(path);
  ASSERT_TRUE(OpenFile(path.string()).ok());
  SetStderr(false);
  ::testing::internal::CaptureStderr();
  constexpr Logger kLog("worker");
  kLog.Info("registered", {{"id", "w1"}});
  kLog.Debug("not at the default level");
  SetMinLevel(Level::kDebug);
  kLog.Debug("now shown");
  SetMinLevel(Level::kInfo);
  const std::string on_screen = ::testing::internal::GetCapturedStderr();
  CloseFile();
  SetStderr(true);
  EXPECT_EQ(on_screen, "");
  const std::string text = ReadFile(path);
  EXPECT_NE(text.find(" INFO  worker: registered id=w1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("not at the default level"), std::string::npos) << text;
  EXPECT_NE(text.find(" DEBUG worker: now shown\n"), std::string::npos) << text;
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::filesystem::remove(path);
}

TEST(LogTest, AFileThatCannotBeOpenedIsAnIoErrorNamingIt) {
  Status s = OpenFile("/nonexistent-dir/x.log");
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_NE(s.message().find("/nonexistent-dir/x.log"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace bakeoff::logging
