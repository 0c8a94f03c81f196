// The guarded YAML document: size and nesting caps before yaml-cpp builds a tree, alias expansion counted, syntax hints, sorted errors.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

// ---------------------------------------------------------------------------
// From text to one YAML document.

// Aliases expanded, a document may nest deeper than its text does (an
// alias inside the very node it names even nests forever); deeper than this
// is refused.
constexpr int kMaxExpandedDepth = 256;


// Counts nodes as a reader would visit them, aliases expanded, stopping as
// soon as the count passes kMaxNodes or the depth kMaxExpandedDepth.
void CountExpandedNodes(const YAML::Node& n, Expansion* e, int depth) {
  if (depth > kMaxExpandedDepth) {
    e->too_deep = true;
    return;
  }
  if (++e->count > kMaxNodes) return;
  if (n.IsSequence()) {
    for (const YAML::Node& child : n) {
      CountExpandedNodes(child, e, depth + 1);
      if (e->exceeded()) return;
    }
  } else if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      CountExpandedNodes(it->first, e, depth + 1);
      CountExpandedNodes(it->second, e, depth + 1);
      if (e->exceeded()) return;
    }
  }
}

// The message for an Expansion that exceeded a limit.
std::string ExpansionMessage(const Expansion& e) {
  if (e.too_deep) {
    return "aliases nest deeper than " + std::to_string(kMaxExpandedDepth) +
           " levels once expanded (an alias inside the node it names refers to itself); "
           "refusing it";
  }
  return "aliases expand to more than " + std::to_string(kMaxNodes) +
         " YAML nodes; refusing what looks like an alias bomb "
         "('billion laughs'); aliases are fine, but not that many";
}

// Finds what yaml-cpp 0.7 accepts silently: duplicate keys (it keeps both)
// and unterminated quotes (it swallows the rest of the file). Each node is
// visited once, aliases included.
class StructureCheck {
 public:
  StructureCheck(const Source& src, std::string_view text) : src_(src), text_(text) {}

  void Walk(const YAML::Node& n, const std::string& path) {
    if (!n.IsDefined() || n.IsNull()) return;
    if (!visited_.insert({n.Mark().pos, static_cast<int>(n.Type())}).second) return;
    if (n.IsScalar()) {
      CheckQuote(n, path);
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) Walk(n[i], path + "[" + std::to_string(i) + "]");
    } else if (n.IsMap()) {
      std::map<std::string, int> first_line;
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) {
          Walk(it->first, path);
          Walk(it->second, path);
          continue;
        }
        const std::string& name = it->first.Scalar();
        std::string child = path.empty() ? name : path + "." + name;
        CheckQuote(it->first, child);
        auto [seen, inserted] = first_line.emplace(name, it->first.Mark().line + 1);
        if (!inserted) {
          duplicates_.push_back(
              {src_.name, it->first.Mark().line + 1, it->first.Mark().column + 1, child,
               "duplicate key; first set at line " + std::to_string(seen->second)});
        }
        Walk(it->second, child);
      }
    }
  }

  std::vector<JobFileError>& unterminated() { return unterminated_; }
  std::vector<JobFileError>& duplicates() { return duplicates_; }

 private:
  void CheckQuote(const YAML::Node& n, const std::string& path) {
    if (n.Tag() != "!") return;  // only quoted and block scalars carry "!"
    size_t pos = n.Mark().pos;
    if (pos >= text_.size() || (text_[pos] != '"' && text_[pos] != '\'')) return;
    if (QuotedScalarIsClosed(text_, pos)) return;
    unterminated_.push_back({src_.name, n.Mark().line + 1, n.Mark().column + 1, path,
                             UnclosedQuoteMessage(text_[pos])});
  }

  const Source& src_;
  std::string_view text_;
  std::set<std::pair<size_t, int>> visited_;
  std::vector<JobFileError> unterminated_;
  std::vector<JobFileError> duplicates_;
};

// Sees where documents start without building them. yaml-cpp 0.7's LoadAll
// never returns on some malformed text (a stray ',' or ']' it neither
// places nor consumes yields one empty document after another), so
// documents are counted with this, a bounded number of times, and only the
// first is built with YAML::Load.
//
// It also holds nesting to kMaxNestingDepth exactly as yaml-cpp reads it
// (collections open at once). The text scan before it (CheckRawText) is an
// estimate that yaml-cpp's reading of scalars' extents can get past (see
// FindDeepNesting); this pass cannot be, and it is safe to run on such text
// because yaml-cpp's own recursion stops at its depth guard (2000).
class DocumentProbe : public YAML::EventHandler {
 public:
  // Thrown from an event (yaml-cpp is exception-safe C++) to stop parsing
  // as soon as the text holds more nodes than a job file ever needs.
  struct TooManyNodes {
    YAML::Mark at;
  };
  // Thrown when a collection opens kMaxNestingDepth + 1 levels deep.
  struct TooDeep {
    YAML::Mark at;
  };

  const std::vector<YAML::Mark>& starts() const { return starts_; }

  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
    Open(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
    Open(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Count(const YAML::Mark& mark) {
    if (++nodes_ > kMaxNodes) throw TooManyNodes{mark};
  }
  void Open(const YAML::Mark& mark) {
    if (++depth_ > kMaxNestingDepth) throw TooDeep{mark};
  }

  std::vector<YAML::Mark> starts_;
  long long nodes_ = 0;
  int depth_ = 0;
};

// A plain-words reading of yaml-cpp's commonest syntax messages, or "".
std::string SyntaxHint(const std::string& yaml_message) {
  static const std::pair<std::string_view, std::string_view> kHints[] = {
      {"illegal map value",
       " (a ':' where no key can start: check the indentation, or quote a value that holds ': ')"},
      {"illegal block entry", " (a '- ' where no list can start: check the indentation)"},
      {"end of map not found", " (check the indentation of the lines around here)"},
      {"end of sequence not found", " (check the indentation of the lines around here)"},
      {"illegal map key", " (check the indentation, or quote a key)"},
  };
  for (const auto& [message, hint] : kHints) {
    if (yaml_message == message) return std::string(hint);
  }
  return "";
}

// Checks and parses one YAML document, reporting every problem to `src`.
// nullopt when nothing more can be read from it; a document with
// duplicate keys is returned (its readers report more) with those errors.
std::optional<YAML::Node> ParseDocument(const Source& src, std::string_view text,
                                        std::string_view what) {
  const std::string kWhat(what);
  if (text.size() > kMaxJobFileBytes) {
    src.Error(1, 1, "", kWhat + " is larger than 1 MiB; barge refuses to parse it");
    return std::nullopt;
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<TextProblem> problems = CheckRawText(text);
  for (const TextProblem& p : problems) src.Error(p.line, p.column, "", p.message);
  if (!problems.empty()) return std::nullopt;
  if (IsBlank(text)) {
    src.Error(1, 1, "", "empty " + kWhat);
    return std::nullopt;
  }
  const std::string owned(text);
  YAML::Node root;
  try {
    // How many documents and nodes, before building one: at most three
    // documents are looked at.
    DocumentProbe probe;
    std::istringstream in(owned);
    YAML::Parser parser(in);
    for (int i = 0; i < 3 && parser.HandleNextDocument(probe); ++i) {
    }
    const std::vector<YAML::Mark>& starts = probe.starts();
    for (size_t i = 1; i < starts.size(); ++i) {
      if (starts[i].pos == starts[i - 1].pos) {
        // A token yaml-cpp cannot place and does not consume: it would
        // yield empty documents here forever.
        const size_t pos = static_cast<size_t>(starts[i].pos);
        const char c = pos < text.size() ? text[pos] : ' ';
        src.Error(starts[i], "", std::string("YAML syntax error: unexpected '") + c + "'");
        return std::nullopt;
      }
    }
    if (starts.size() > 1) {
      src.Error(starts[1].line + 1, 1, "",
                "a second YAML document starts here; a " + kWhat + " holds exactly one");
      return std::nullopt;
    }
    root = YAML::Load(owned);
  } catch (const DocumentProbe::TooDeep& too_deep) {
    if (too_deep.at.is_null()) {
      src.Error(1, 1, "", NestedTooDeepMessage(kMaxNestingDepth));
    } else {
      src.Error(too_deep.at, "", NestedTooDeepMessage(kMaxNestingDepth));
    }
    return std::nullopt;
  } catch (const DocumentProbe::TooManyNodes& too_many) {
    src.Error(too_many.at, "",
              "more than " + std::to_string(kMaxNodes) +
                  " YAML values; barge refuses to build them (a job file needs a few hundred)");
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    int line = e.mark.line + 1;
    int column = e.mark.column + 1;
    if (int tab = TabIndentColumn(text, line); tab > 0) {
      src.Error(line, tab, "",
                "tab character used for indentation (YAML indents with spaces only)");
    } else if (std::optional<TextProblem> quote = FindUnclosedQuote(text)) {
      // yaml-cpp reports these where it gave up, often the end of the file,
      // nowhere near the cause.
      src.Error(quote->line, quote->column, "", quote->message);
    } else if (std::optional<TextProblem> flow = FindUnclosedFlow(text)) {
      src.Error(flow->line, flow->column, "", flow->message);
    } else if (e.mark.is_null()) {
      src.Error(1, 1, "", "YAML syntax error: " + e.msg + SyntaxHint(e.msg));
    } else {
      src.Error(line, column, "", "YAML syntax error: " + e.msg + SyntaxHint(e.msg));
    }
    return std::nullopt;
  }
  if (root.IsNull()) {
    src.Error(1, 1, "", "empty " + kWhat + " (nothing but comments)");
    return std::nullopt;
  }
  Expansion expansion;
  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      CountExpandedNodes(it->second, &expansion);
      if (expansion.exceeded()) {
        src.Error(it->first.Mark(), it->first.Scalar(), ExpansionMessage(expansion));
        return std::nullopt;
      }
    }
  } else {
    CountExpandedNodes(root, &expansion);
    if (expansion.exceeded()) {
      src.Error(root.Mark(), "", ExpansionMessage(expansion));
      return std::nullopt;
    }
  }
  StructureCheck structure(src, text);
  structure.Walk(root, "");
  if (!structure.unterminated().empty()) {
    // Everything after the quote was swallowed into it: nothing else in the
    // file can be trusted, so nothing else is reported.
    for (JobFileError& e : structure.unterminated()) src.errors->push_back(std::move(e));
    return std::nullopt;
  }
  for (JobFileError& e : structure.duplicates()) src.errors->push_back(std::move(e));
  return root;
}

// Reads at most kMaxJobFileBytes + 1 bytes of `path`: enough for the size
// check to see that a file is too big, without reading all of it.
bool ReadFileCapped(const std::string& path, std::string* out, std::string* error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    *error = "it is a directory";
    return false;
  }
  out->clear();
  char buf[65536];
  while (out->size() <= kMaxJobFileBytes) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (out->size() > kMaxJobFileBytes + 1) out->resize(kMaxJobFileBytes + 1);
  return true;
}

// Orders errors by file (in order of first appearance), then position, and
// drops exact repeats (a block reached through two aliases).
void SortErrors(std::vector<JobFileError>* errors) {
  std::vector<std::string> files;
  for (const JobFileError& e : *errors) {
    if (std::find(files.begin(), files.end(), e.file) == files.end()) files.push_back(e.file);
  }
  auto rank = [&](const JobFileError& e) {
    return std::find(files.begin(), files.end(), e.file) - files.begin();
  };
  std::stable_sort(errors->begin(), errors->end(),
                   [&](const JobFileError& a, const JobFileError& b) {
                     return std::make_tuple(rank(a), a.line, a.column) <
                            std::make_tuple(rank(b), b.line, b.column);
                   });
  std::set<std::tuple<std::string, int, int, std::string>> seen;
  std::erase_if(*errors, [&](const JobFileError& e) {
    return !seen.insert({e.file, e.line, e.column, e.message}).second;
  });
}

}  // namespace barge::runner::jobfile
