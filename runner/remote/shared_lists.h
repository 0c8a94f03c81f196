// The `docker run` line of a large job without N copies of the node list:
// long env values that repeat, or that are another form of the same list,
// are spelled once as shell variables.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace barge::runner {

// Values shorter than this stay inline (lines of small jobs read as before).
inline constexpr size_t kSharedValueMinSize = 1024;

// Like ssh::ShellJoin(argv), for a command whose env is given as "-e"
// "KEY=VALUE" pairs (container::RunArgs). A VALUE of at least `min_size`
// bytes that is a comma list (no empty element, no quote, backslash,
// comma or newline inside an element) is set once in a shell variable;
// every `-e` value that equals it, or equals the same elements joined by
// newlines, or written as a JSON list of strings (["a","b"]), refers to a
// variable derived from it in the shell (no extra process). Any other long
// value that occurs more than once is set once too. The shell gives docker
// exactly the bytes ShellJoin would: it is the same argv. A line with no such
// value is ShellJoin(argv).
std::string ShellJoinSharingLists(const std::vector<std::string>& argv,
                                  size_t min_size = kSharedValueMinSize);

}  // namespace barge::runner
