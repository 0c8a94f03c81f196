#include "runner/array/array_params.h"

#include <gtest/gtest.h>

namespace barge::runner::array {
namespace {

TEST(ArrayParams, CsvRowsFollowTheHeaderWithQuotesCommasAndCrlf) {
  Result<ArrayParams> p = ParseCsv("lr,seed,note\r\n0.1,1,plain\r\n\n0.01,2,\"a, b \"\"q\"\"\"\n", "p.csv");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->columns, (std::vector<std::string>{"lr", "seed", "note"}));
  ASSERT_EQ(p->rows.size(), 2u);
  EXPECT_EQ(p->rows[0], (std::vector<std::string>{"0.1", "1", "plain"}));
  EXPECT_EQ(p->rows[1], (std::vector<std::string>{"0.01", "2", "a, b \"q\""}));
}

TEST(ArrayParams, CsvRowWithTooFewFieldsIsAnErrorNamingFileAndLine) {
  Result<ArrayParams> p = ParseCsv("a,b\n1,2\n3\n", "p.csv");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "p.csv:3: 1 field(s), but the header has 2");
}

TEST(ArrayParams, ABadColumnNameIsAnErrorNamingFileLineAndColumn) {
  Result<ArrayParams> p = ParseCsv("\nlr,my-col\n1,2\n", "params.csv");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind("params.csv:2: column 'my-col' is not a lower-case variable name", 0), 0u)
      << p.status().message();
  EXPECT_FALSE(ParseCsv("a,a\n1,2\n", "p.csv").ok());
  EXPECT_FALSE(ParseCsv("a\n", "p.csv").ok());  // no rows
  EXPECT_FALSE(ParseCsv("a\n\"open\n", "p.csv").ok());
}

// A colleague's header must not name a variable that a loader, a shell, an
// interpreter, MPI or barge's rendezvous reads: each would run code in every
// member (BASH_ENV, LD_PRELOAD...) or move its rendezvous (MASTER_ADDR).
TEST(ArrayParams, ColumnsNamingVariablesProgramsReadAreRefusedAtTheHeadersLine) {
  for (const char* name : {"BASH_ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "PERL5OPT", "PYTHONPATH", "PYTHONSTARTUP",
                           "OMPI_MCA_plm_rsh_agent", "NCCL_NET_PLUGIN", "PATH", "ENV", "IFS", "PS4", "MASTER_ADDR",
                           "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "BARGE_ARRAY_INDEX",
                           "AWS_BATCH_JOB_ARRAY_INDEX", "Lr", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
                           "path", "fpath"}) {
    const std::string csv = std::string("lr,") + name + "\n1,2\n";
    Result<ArrayParams> p = ParseCsv(csv, "params.csv");
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().message().rfind(std::string("params.csv:1: column '") + name + "' is", 0), 0u)
        << p.status().message();
    Result<ArrayParams> j = ParseJsonl(std::string("\n{\"lr\": 1, \"") + name + "\": 2}\n", "p.jsonl");
    ASSERT_FALSE(j.ok()) << name;
    EXPECT_EQ(j.status().message().rfind(std::string("p.jsonl:2: column '") + name + "'", 0), 0u)
        << j.status().message();
    EXPECT_FALSE(ExpandMatrix({{name, {"1"}}}).ok()) << name;
  }
  for (const char* name : {"lr", "seed", "note", "host_group", "_x", "batch_size2"}) {
    EXPECT_TRUE(ParseCsv(std::string(name) + "\n1\n", "p.csv").ok()) << name;
  }
}

TEST(ArrayParams, RecordedRowsWithAColumnTheRuleRefusesAreRefusedOnRerun) {
  Result<ArrayParams> p = ParamsFromJson(R"({"source": "old.csv", "columns": ["LD_PRELOAD"], "rows": [["/x.so"]]})");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("column 'LD_PRELOAD'"), std::string::npos) << p.status().message();
}

TEST(ArrayParams, JsonLinesTakeTheFirstLinesKeysAndWriteNumbersAsJsonDoes) {
  Result<ArrayParams> p =
      ParseJsonl("{\"lr\": 0.1, \"seed\": 1, \"name\": \"a b\"}\n\n{\"seed\": 2, \"lr\": 0.01, \"name\": \"x\"}\n", "p.jsonl");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->columns, (std::vector<std::string>{"lr", "seed", "name"}));
  EXPECT_EQ(p->rows[0], (std::vector<std::string>{"0.1", "1", "a b"}));
  EXPECT_EQ(p->rows[1], (std::vector<std::string>{"0.01", "2", "x"}));
  Result<ArrayParams> missing = ParseJsonl("{\"a\": 1, \"b\": 2}\n{\"a\": 1}\n", "p.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "p.jsonl:2: 1 key(s), but the first line has 2");
  EXPECT_FALSE(ParseJsonl("{\"a\": [1]}\n", "p.jsonl").ok());
  EXPECT_FALSE(ParseJsonl("not json\n", "p.jsonl").ok());
}

TEST(ArrayParams, AMatrixGivesEveryCombinationWithTheFirstColumnSlowest) {
  Result<ArrayParams> p = ExpandMatrix({{"lr", {"0.1", "0.01"}}, {"seed", {"1", "2", "3"}}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->rows.size(), 6u);
  EXPECT_EQ(p->rows[0], (std::vector<std::string>{"0.1", "1"}));
  EXPECT_EQ(p->rows[2], (std::vector<std::string>{"0.1", "3"}));
  EXPECT_EQ(p->rows[3], (std::vector<std::string>{"0.01", "1"}));
  EXPECT_EQ(p->rows[5], (std::vector<std::string>{"0.01", "3"}));
}

TEST(ArrayParams, RowsSurviveTheStoresJsonAndPrintAsNameValuePairs) {
  Result<ArrayParams> p = ParseCsv("lr,note\n0.1,a b\n", "p.csv");
  ASSERT_TRUE(p.ok());
  Result<ArrayParams> back = ParamsFromJson(ParamsToJson(*p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rows, p->rows);
  EXPECT_EQ(back->columns, p->columns);
  EXPECT_EQ(ParamsText(*p, 0), "lr=0.1 note='a b'");
}

}  // namespace
}  // namespace barge::runner::array
