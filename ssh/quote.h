// The one function that turns a value into a word for a POSIX shell. Every
// argument barge sends to a remote shell goes through it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace barge::ssh {

// Returns `word` quoted so that a POSIX shell reads it back as exactly one
// word with exactly these bytes: no expansion of $, `, \, globs or ~, and
// newlines and non-ASCII bytes kept. Words made only of
// [A-Za-z0-9_@%+=:,./-] (and not empty) are returned as they are, so that
// printed commands stay readable. `word` must not contain NUL.
std::string ShellQuote(std::string_view word);

// Quotes every element and joins them with single spaces. The first element
// is quoted even when it is made of safe characters if the shell would read it
// as an assignment (`A=B`) or a reserved word (`if`), so the line always runs
// argv[0] as a command.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace barge::ssh
