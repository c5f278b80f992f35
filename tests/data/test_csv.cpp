// tf.data.experimental.CsvDataset (data/csv.h): the records of small files against what TF 2.21
// gives for the same files and arguments (tensorflow-cpu 2.21, the Python lines quoted in each
// case), quoting, header, defaults, na_value, select_cols / exclude_cols, several files, and the
// errors for bad records and bad arguments.
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "ops/factory.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::experimental::CsvDataset;
using tf::testing::require_error;
using tf::testing::TempDir;

namespace {

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Every element's components as doubles, row after row.
std::vector<std::vector<double>> rows_of(const Dataset& ds) {
  std::vector<std::vector<double>> out;
  for (const Element& e : ds) {
    std::vector<double> row;
    for (const tf::Tensor& t : e) {
      REQUIRE(t.rank() == 0);
      row.push_back(tf::detail::to_double_vector(t)[0]);
    }
    out.push_back(row);
  }
  return out;
}

tf::Tensor required(tf::DType dtype) {
  return tf::zeros({0}, dtype);
}

using Rows = std::vector<std::vector<double>>;

}  // namespace

TEST_CASE("csv: CsvDataset reads records as TF", "[data][csv]") {
  TempDir dir;
  // a,b,c / 1,2.5,x / 3,,"4" / (empty) / 5,"6,5",7 with a CRLF ending.
  const std::string t = write(dir, "t.csv", "a,b,c\n1,2.5,x\n3,,\"4\"\n\n5,\"6,5\",7\r\n");
  // CsvDataset("t.csv", [tf.constant(0, tf.int64), tf.constant(-1.0, tf.float64)],
  //            header=True, select_cols=[0, 1]) -> [1, 2.5], [3, -1.0], then "Expect 2 fields
  //            but have 1 in record" at the empty line.
  const Dataset sel = CsvDataset({t}, {tf::Tensor(int64_t{0}), tf::Tensor(-1.0)},
                                 {.header = true, .select_cols = {0, 1}});
  std::vector<Element> got;
  require_error(
      [&] {
        for (const Element& e : sel) got.push_back(e);
      },
      {"[CsvDataset] Expect at least 2 fields", "but have 1 in record 2 of", "t.csv' (line 4)"});
  REQUIRE(got.size() == 2);
  CHECK(got[0][0].dtype() == tf::int64);
  CHECK(got[0][1].dtype() == tf::float64);
  CHECK(tf::detail::to_double_vector(got[1][1])[0] == -1.0);
  // select_cols=[0] and use_quote_delim=False -> 1, 3, 0 (the empty line: default), 5.
  CHECK(rows_of(CsvDataset({t}, {tf::Tensor(int32_t{0})},
                           {.header = true, .use_quote_delim = false, .select_cols = {0}})) ==
        Rows{{1}, {3}, {0}, {5}});
  // Quotes: "6,5" is one field; column 2 exclude_cols'd.
  const std::string q = write(dir, "q.csv", "5,\"6,5\",7\n\"1\"\"\",2,3\n");
  require_error(
      [&] {
        rows_of(CsvDataset({q}, {tf::Tensor(0.0f), tf::Tensor(0.0f)}, {.exclude_cols = {2}}));
      },
      {"Field 1 in record 0 of", "q.csv' (line 1) is not a valid float32: 6,5"});
  CHECK(rows_of(CsvDataset({q}, {tf::Tensor(0.0f)}, {.select_cols = {2}})) == Rows{{7}, {3}});
  // A quoted field spans lines; "" is a quote.
  const std::string ml = write(dir, "ml.csv", "1,\"a\nb\"\"\",2\n3,x,4\n");
  CHECK(rows_of(CsvDataset({ml}, {tf::Tensor(0), tf::Tensor(0)}, {.exclude_cols = {1}})) ==
        Rows{{1, 2}, {3, 4}});
}

TEST_CASE("csv: defaults, required columns, na_value and several files", "[data][csv]") {
  TempDir dir;
  const std::string req = write(dir, "req.csv", "1,2.5\n,3\n");
  // [tf.constant([], tf.int32), tf.constant(0.)] -> [1, 2.5], then "Field 0 is required but
  // missing in record!".
  std::vector<Element> got;
  require_error(
      [&] {
        for (const Element& e : CsvDataset({req}, {required(tf::int32), tf::Tensor(0.0f)}))
          got.push_back(e);
      },
      {"Field 0 is required but missing in record 1 of", "req.csv' (line 2)"});
  CHECK(got.size() == 1);
  // na_value="3": [1, 2.5], [0, 0].
  CHECK(rows_of(CsvDataset({req}, {tf::Tensor(0), tf::Tensor(0.0f)}, {.na_value = "3"})) ==
        Rows{{1, 2.5}, {0, 0}});
  // Two files, default 7 for the missing int: [1, 2.5], [7, 3], [1, 2.5], [7, 3].
  CHECK(rows_of(CsvDataset({req, req}, {tf::Tensor(7), tf::Tensor(0.0f)})) ==
        Rows{{1, 2.5}, {7, 3}, {1, 2.5}, {7, 3}});
  // Numbers: spaces, '+', exponents, inf; a one-element vector default; ';' delimiter.
  const std::string nums = write(dir, "n.csv", " +4 ; 1e3;-inf;\n-2;  .5 ;7; 9\n");
  const auto rows = rows_of(CsvDataset({nums},
                                       {tf::Tensor(int64_t{0}), tf::Tensor(0.0), tf::Tensor(0.0f),
                                        tf::constant(std::vector<int32_t>{42})},
                                       {.field_delim = ';'}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == std::vector<double>{4, 1000, -std::numeric_limits<double>::infinity(), 42});
  CHECK(rows[1] == std::vector<double>{-2, 0.5, 7, 9});
  // A NaN default for a float column (a common choice for missing values).
  const auto nan_rows = rows_of(
      CsvDataset({req}, {tf::Tensor(0), tf::Tensor(std::numeric_limits<float>::quiet_NaN())},
                 {.na_value = "3"}));
  REQUIRE(nan_rows.size() == 2);
  CHECK(std::isnan(nan_rows[1][1]));
  // Iterating again starts over.
  const Dataset twice = CsvDataset({req}, {tf::Tensor(5), tf::Tensor(0.0f)});
  CHECK(rows_of(twice) == rows_of(twice));
  CHECK(twice.cardinality() == tf::data::UNKNOWN_CARDINALITY);
}

TEST_CASE("csv: bad records and bad arguments raise clear errors", "[data][csv]") {
  TempDir dir;
  const std::string bad = write(dir, "bad.csv", "1,abc\n");
  // TF: "Field 1 in record is not a valid float: abc" / "... not a valid int32: abc".
  require_error(
      [&] {
        rows_of(CsvDataset({bad}, {tf::Tensor(0), tf::Tensor(0.0f)}));
      },
      {"Field 1 in record 0 of", "is not a valid float32: abc"});
  require_error(
      [&] {
        rows_of(CsvDataset({bad}, {tf::Tensor(0), tf::Tensor(0)}));
      },
      {"is not a valid int32: abc"});
  const std::string big = write(dir, "big.csv", "3000000000\n");
  require_error([&] { rows_of(CsvDataset({big}, {tf::Tensor(0)})); },
                {"not a valid int32: 3000000000"});
  CHECK(rows_of(CsvDataset({big}, {tf::Tensor(int64_t{0})})) == Rows{{3e9}});
  // TF: "Expect 2 fields but have 1 in record".
  const std::string shrt = write(dir, "short.csv", "1,2\n3\n");
  require_error(
      [&] {
        rows_of(CsvDataset({shrt}, {tf::Tensor(0), tf::Tensor(0)}));
      },
      {"Expect 2 fields but have 1 in record 1 of", "short.csv' (line 2)"});
  require_error([&] { rows_of(CsvDataset({shrt}, {tf::Tensor(0)})); },
                {"Expect 1 fields but have 2 in record 0"});
  const std::string open = write(dir, "open.csv", "1,\"2\n");
  require_error(
      [&] {
        rows_of(CsvDataset({open}, {tf::Tensor(0), tf::Tensor(0)}));
      },
      {"ends inside a quoted field"});
  const std::string after = write(dir, "after.csv", "\"1\"x,2\n");
  require_error(
      [&] {
        rows_of(CsvDataset({after}, {tf::Tensor(0), tf::Tensor(0)}));
      },
      {"characters after its closing quote"});
  // TF: NotFoundError "nofile.csv; No such file or directory".
  CHECK_THROWS_AS(rows_of(CsvDataset({dir / "nofile.csv"}, {tf::Tensor(0)})), tf::NotFoundError);
  // Arguments, checked when the dataset is made. TF: "select_cols should be strictly increasing
  // indices".
  require_error(
      [&] {
        CsvDataset({bad}, {tf::Tensor(0), tf::Tensor(0.0f)}, {.select_cols = {1, 0}});
      },
      {"select_cols should be strictly increasing indices"});
  require_error(
      [&] {
        CsvDataset({bad}, {tf::Tensor(0)}, {.select_cols = {0, 1}});
      },
      {"select_cols has 2 columns but record_defaults 1"});
  require_error(
      [&] { CsvDataset({bad}, {tf::Tensor(0)}, {.select_cols = {0}, .exclude_cols = {1}}); },
      {"cannot both"});
  require_error([&] { CsvDataset({bad}, {tf::Tensor(true)}); },
                {"record_defaults[0] has dtype bool", "select_cols"});
  require_error([&] { CsvDataset({bad}, {tf::zeros({2})}); }, {"record_defaults[0]", "shape (2,)"});
  require_error([&] { CsvDataset({}, {tf::Tensor(0)}); }, {"no filenames"});
  require_error([&] { CsvDataset({bad}, {}); }, {"record_defaults is empty"});
}
