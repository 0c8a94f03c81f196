#include "runner/array/array_params.h"

#include <gtest/gtest.h>

namespace barge::runner::fleet {
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

TEST(ArrayParams, ABadColumnNameIsAnErrorNamingFileAndColumn) {
  Result<ArrayParams> p = ParseCsv("lr,my-col\n1,2\n", "params.csv");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "params.csv: column 'my-col' is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_FALSE(ParseCsv("BARGE_ARRAY_INDEX\n1\n", "p.csv").ok());
  EXPECT_FALSE(ParseCsv("a,a\n1,2\n", "p.csv").ok());
  EXPECT_FALSE(ParseCsv("a\n", "p.csv").ok());  // no rows
  EXPECT_FALSE(ParseCsv("a\n\"open\n", "p.csv").ok());
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
}  // namespace barge::runner::fleet
