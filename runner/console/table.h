// The one table printer: columns padded to their widest cell, `gap` apart
// (two spaces, or " | "), trailing spaces dropped; rows[0] is usually the
// header.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace barge::runner {

std::string FormatTable(const std::vector<std::vector<std::string>>& rows, std::string_view gap = "  ");
void PrintTable(std::FILE* out, const std::vector<std::vector<std::string>>& rows);

}  // namespace barge::runner
