// test_course_docs.cpp — the course's lessons (docs/course/lesson-*.md) show what their commands
// print. In a lesson, a ```console block holds commands ("$ " lines) each followed by lines of its
// output: a program of build/examples is run from the repository root on one thread, and each
// quoted line must begin a line it prints (a quote may stop before a figure that varies, a time);
// `scripts/course.sh check N`'s lines must be lesson N's exercises, as their markers in the code
// name them. And each lesson stays within 150 lines.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "skip.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

struct Exercise {
  std::string name, hint;
};

// Every "// exercise N.k: NAME — HINT" marker of the library and examples, by "N.k".
std::map<std::string, Exercise> exercise_markers() {
  std::map<std::string, Exercise> found;
  const std::regex marker(R"(^\s*// exercise (\d+\.\d+): (\S+) — (.*)$)");
  for (const char* dir : {"tensor", "autograd", "amp", "nn", "optim", "data", "diagnostics", "distributed", "examples"})
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(AMPGRAD_SOURCE_DIR) / dir)) {
      std::ifstream in(entry.path());
      std::smatch m;
      for (std::string line; entry.is_regular_file() && std::getline(in, line);)
        if (std::regex_match(line, m, marker)) found[m[1]] = {m[2], m[3]};
    }
  return found;
}

bool begins_a_line(const std::string& output, const std::string& quoted) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(quoted, 0) == 0) return true;
  return false;
}

// Runs the lesson's console blocks; returns how many quoted lines it checked.
int check_lesson(const std::string& lesson) {
  const std::string path = AMPGRAD_SOURCE_DIR "/docs/course/" + lesson;
  std::ifstream doc(path);
  REQUIRE_MESSAGE(doc, "no " << path);
  const std::map<std::string, Exercise> exercises = exercise_markers();
  std::vector<std::pair<std::string, std::vector<std::string>>> commands;  // each with its quoted lines
  bool in_console = false;
  int lines = 0;
  for (std::string line; std::getline(doc, line); ++lines) {
    if (line.rfind("```", 0) == 0) in_console = !in_console && line == "```console";
    else if (in_console && line.rfind("$ ", 0) == 0) commands.push_back({line.substr(2), {}});
    else if (in_console && !line.empty()) {
      REQUIRE_MESSAGE(!commands.empty(), lesson << ": a console block must start with a command: " << line);
      commands.back().second.push_back(line);
    }
  }
  CHECK_MESSAGE(lines <= 150, lesson << " has " << lines << " lines");
  int checked = 0;
  const std::regex course_check(R"(scripts/course\.sh check (\d+))"), course_line(R"(exercise (\d+\.\d+) (\S+): (done|not done yet \((.*)\)))");
  for (const auto& entry : commands) {  // no structured bindings: clang 14's lambdas (CAPTURE) cannot capture them
    const std::string& command = entry.first;
    const std::vector<std::string>& quoted = entry.second;
    CAPTURE(command);
    std::smatch m;
    if (std::regex_match(command, m, course_check)) {  // its lines name lesson N's exercises, all of them
      const std::string lesson_number = m[1];
      std::set<std::string> shown;
      for (const std::string& q : quoted) {
        CAPTURE(q);
        std::smatch e;
        REQUIRE(std::regex_match(q, e, course_line));
        REQUIRE(exercises.count(e[1]));
        CHECK(e[1].str().rfind(lesson_number + ".", 0) == 0);
        CHECK(exercises.at(e[1]).name == e[2].str());
        if (e[4].matched) CHECK(exercises.at(e[1]).hint == e[4].str());
        shown.insert(e[1]);
        ++checked;
      }
      for (const auto& numbered : exercises) {
        const std::string& number = numbered.first;
        if (number.rfind(lesson_number + ".", 0) == 0) CHECK_MESSAGE(shown.count(number), command << " shows no line of exercise " << number);
      }
      continue;
    }
    if (command.rfind("scripts/course.sh start ", 0) == 0) continue;  // prints where the tree is
    REQUIRE_MESSAGE(command.rfind("build/examples/", 0) == 0, lesson << ": a console block runs build/examples' programs only");
    const CommandResult run = run_command("cd " AMPGRAD_SOURCE_DIR " && OMP_NUM_THREADS=1 " EXAMPLES_DIR "/" + command.substr(15));
    REQUIRE_MESSAGE(run.status == 0, run.output);
    for (const std::string& q : quoted) {
      CHECK_MESSAGE(begins_a_line(run.output, q), command << " no longer prints a line beginning: " << q);
      ++checked;
    }
  }
  return checked;
}

}  // namespace

// The programs the lessons run read the MNIST digits (scripts/get-data.sh fetches them).
#define LESSON_TEST_CASE(file)                                                                         \
  TEST_CASE("docs/course/" file " quotes what its commands print") {                                   \
    SKIP_TEST_IF(!fs::exists(AMPGRAD_SOURCE_DIR "/data-cache/mnist"), "no MNIST digits in data-cache/mnist"); \
    CHECK(check_lesson(file) >= 6);                                                                    \
  }
LESSON_TEST_CASE("lesson-1-mixed-precision.md")
LESSON_TEST_CASE("lesson-2-gradient-accumulation.md")
LESSON_TEST_CASE("lesson-3-profiling.md")
LESSON_TEST_CASE("lesson-4-memory.md")
