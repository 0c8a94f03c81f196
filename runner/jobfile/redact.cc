#include "runner/jobfile/redact.h"

#include <algorithm>

namespace barge::runner {
namespace {

std::string_view TrimLineBreaks(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

Redactor::Redactor(const JobSpec& spec) {
  for (const SecretSpec& s : spec.secrets) Add(s.value);
  if (spec.registry) Add(spec.registry->password);
  if (spec.storage) {
    Add(spec.storage->secret_key);
    Add(spec.storage->session_token);
  }
  for (const NotifySpec& n : spec.notify) {
    Add(n.secret);
    if (n.url_secret) Add(n.url);
  }
}

void Redactor::Add(std::string_view value) {
  auto keep = [this](std::string_view v) {
    if (v.size() < kMinLength) return;
    if (std::find(values_.begin(), values_.end(), v) == values_.end()) values_.emplace_back(v);
  };
  keep(value);
  keep(TrimLineBreaks(value));
  size_t start = 0;
  while (start < value.size()) {
    size_t end = value.find('\n', start);
    if (end == std::string_view::npos) end = value.size();
    keep(TrimLineBreaks(value.substr(start, end - start)));
    start = end + 1;
  }
  std::stable_sort(values_.begin(), values_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string Redactor::operator()(std::string_view text) const {
  if (values_.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const std::string* hit = nullptr;
    for (const std::string& v : values_) {
      if (text.compare(i, v.size(), v) == 0) {
        hit = &v;
        break;
      }
    }
    if (hit != nullptr) {
      out += kRedacted;
      i += hit->size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace barge::runner
