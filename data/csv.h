// tf.data.experimental.CsvDataset: the records of CSV files as elements of scalar tensors, one
// per column, typed and defaulted by record_defaults, with TF's parsing rules (RFC 4180 quotes,
// header, na_value, select_cols / exclude_cols) and error messages that name the file and line.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace tapeflow::data::experimental {

struct CsvOptions {
  // Skip the first line of every file.
  bool header = false;
  char field_delim = ',';
  // A field in double quotes may hold the delimiter, line breaks and "" for a quote (RFC 4180).
  // false: quotes are ordinary characters.
  bool use_quote_delim = true;
  // A field equal to this text is missing (gets its column's default); an empty field always is.
  std::string na_value = {};
  // The columns to read (strictly increasing indices; the others are skipped, whatever they
  // hold), or the columns to skip. At most one of the two.
  std::vector<int> select_cols = {};
  std::vector<int> exclude_cols = {};
};

// TF's tf.data.experimental.CsvDataset(filenames, record_defaults, ...): one element per record
// (line) of the files, in order, each component a scalar of its record_defaults entry's dtype:
// float32, float64, int32 or int64 (tapeflow has no string tensors: skip text columns with
// select_cols or exclude_cols). A record_defaults entry is a scalar (or a one-element vector)
// giving the value of a missing field, or an empty vector (`tf::zeros({0}, tf::int32)`, TF's
// `tf.constant([], tf.int32)`) for a required column.
//
// Without select_cols / exclude_cols every record must have exactly record_defaults.size()
// fields; with them, the selected columns must exist. Numbers are parsed as TF's (surrounding
// spaces and a leading '+' allowed; "inf", "nan" for floats; integers must fit their dtype).
// Lines may end in "\n" or "\r\n"; an empty line is a record of one empty field, as TF.
// Errors are InvalidArgumentErrors naming the file, the record and its line: "[CsvDataset]
// Expect 3 fields but have 1 in record 2 of 'train.csv' (line 4)", "Field 1 in record 0 of
// 'train.csv' (line 1) is not a valid float32: abc", "Field 0 is required but missing in record
// 1 ..."; a missing file is a NotFoundError when the iteration reaches it. The arguments are
// checked here (dtypes, default shapes, column lists). Cardinality is unknown, as TF's.
Dataset CsvDataset(std::vector<std::string> filenames, std::vector<Tensor> record_defaults,
                   CsvOptions options = {});

}  // namespace tapeflow::data::experimental
