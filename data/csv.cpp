#include "data/csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include "core/check.h"
#include "core/tensor_spec.h"

namespace tapeflow::data::experimental {

namespace {

constexpr const char* kOp = "CsvDataset";

struct Column {
  int index = 0;  // in the record
  DType dtype = float32;
  bool required = false;
  double fallback = 0;       // the float columns' default
  int64_t fallback_int = 0;  // the integer columns'
};

struct Spec {
  std::vector<std::string> files;
  std::vector<Column> columns;  // in output order (increasing record index)
  CsvOptions options;
  // Without select_cols / exclude_cols a record must have exactly this many fields; else the
  // largest selected index + 1 at least (exclude_cols: columns.size() + excluded, exactly).
  size_t exact_fields = 0;
  size_t min_fields = 0;
};

// A file read record by record (a record may span lines inside quotes).
class Reader {
 public:
  Reader(const std::string& path, const CsvOptions& o) : path_(path), options_(o) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      const int err = errno;
      if (err == ENOENT) TF_THROW(NotFoundError, kOp, "'{}': no such file", path);
      TF_THROW(InvalidArgumentError, kOp, "cannot open '{}': {}", path, std::strerror(err));
    }
  }
  ~Reader() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // The next line without its "\n" / "\r\n"; false at the end of the file.
  bool line(std::string& out) {
    out.clear();
    int c;
    bool any = false;
    while ((c = std::getc(file_)) != EOF) {
      any = true;
      if (c == '\n') break;
      out.push_back(static_cast<char>(c));
    }
    if (c == EOF && std::ferror(file_))
      TF_THROW(InvalidArgumentError, kOp, "reading '{}' failed: {}", path_, std::strerror(errno));
    if (!any) return false;
    ++line_;
    if (!out.empty() && out.back() == '\r') out.pop_back();
    return true;
  }

  // Splits the next record into fields (quotes removed); false at the end of the file.
  bool record(std::vector<std::string>& fields) {
    std::string text;
    if (!line(text)) return false;
    record_line_ = line_;
    fields.clear();
    std::string field;
    bool in_quotes = false, was_quoted = false, after_quote = false;
    size_t i = 0;
    for (;;) {
      if (i == text.size()) {
        if (in_quotes) {  // a quoted field goes on over the line break
          std::string more;
          TF_CHECK_ARG(line(more), kOp,
                       "record {} of '{}' (line {}) ends inside a quoted field: the file ends "
                       "before its closing quote",
                       record_, path_, record_line_);
          field.push_back('\n');
          text = std::move(more);
          i = 0;
          continue;
        }
        break;
      }
      const char ch = text[i++];
      if (in_quotes) {
        if (ch == '"') {
          if (i < text.size() && text[i] == '"') {
            field.push_back('"');
            ++i;
          } else {
            in_quotes = false;
            after_quote = true;
          }
        } else {
          field.push_back(ch);
        }
        continue;
      }
      if (ch == options_.field_delim) {
        fields.push_back(std::move(field));
        field.clear();
        was_quoted = after_quote = false;
        continue;
      }
      TF_CHECK_ARG(!after_quote, kOp,
                   "field {} of record {} in '{}' (line {}) has characters after its closing "
                   "quote",
                   fields.size(), record_, path_, line_);
      if (ch == '"' && options_.use_quote_delim && field.empty() && !was_quoted) {
        in_quotes = was_quoted = true;
        continue;
      }
      field.push_back(ch);
    }
    fields.push_back(std::move(field));
    return true;
  }

  // "record 2 of 'train.csv' (line 4)"
  std::string where() const {
    return fmt::format("record {} of '{}' (line {})", record_, path_, record_line_);
  }
  void next_record() { ++record_; }

 private:
  std::string path_;
  const CsvOptions& options_;
  std::FILE* file_ = nullptr;
  int64_t line_ = 0, record_line_ = 0, record_ = 0;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <class T>
std::optional<T> parse_number(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  T v{};
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  return v;
}

template <class T>
Tensor scalar(T v) {
  return tapeflow::detail::from_host<T>(&v, TensorShape{}, Device{});
}

Tensor parse_field(const Column& c, const std::string& text, size_t k, const Reader& r) {
  auto fail = [&]() -> Tensor {
    TF_THROW(InvalidArgumentError, kOp, "Field {} in {} is not a valid {}: {}", k, r.where(),
             dtype_name(c.dtype), text.size() > 60 ? text.substr(0, 57) + "..." : text);
  };
  switch (c.dtype.id) {
    case DTypeId::Float32: {
      const auto v = parse_number<float>(text);
      return v ? scalar(*v) : fail();
    }
    case DTypeId::Float64: {
      const auto v = parse_number<double>(text);
      return v ? scalar(*v) : fail();
    }
    case DTypeId::Int32: {
      const auto v = parse_number<int32_t>(text);
      return v ? scalar(*v) : fail();
    }
    default: {
      const auto v = parse_number<int64_t>(text);
      return v ? scalar(*v) : fail();
    }
  }
}

Tensor fallback_of(const Column& c) {
  switch (c.dtype.id) {
    case DTypeId::Float32:
      return scalar(static_cast<float>(c.fallback));
    case DTypeId::Float64:
      return scalar(c.fallback);
    case DTypeId::Int32:
      return scalar(static_cast<int32_t>(c.fallback_int));
    default:
      return scalar(c.fallback_int);
  }
}

void check_indices(const std::vector<int>& cols, const char* what) {
  for (size_t i = 0; i < cols.size(); ++i) {
    TF_CHECK_ARG(cols[i] >= 0, kOp, "{} has a negative index {}", what, cols[i]);
    TF_CHECK_ARG(i == 0 || cols[i] > cols[i - 1], kOp,
                 "{} should be strictly increasing indices, got {} after {}", what, cols[i],
                 cols[i - 1]);
  }
}

std::shared_ptr<const Spec> make_spec(std::vector<std::string> files,
                                      const std::vector<Tensor>& defaults, CsvOptions o) {
  TF_CHECK_ARG(!files.empty(), kOp, "no filenames given");
  TF_CHECK_ARG(!defaults.empty(), kOp, "record_defaults is empty: give one entry per column");
  TF_CHECK_ARG(o.select_cols.empty() || o.exclude_cols.empty(), kOp,
               "select_cols and exclude_cols cannot both be given");
  TF_CHECK_ARG(o.field_delim != '"' && o.field_delim != '\n' && o.field_delim != '\r', kOp,
               "field_delim cannot be a quote or a line break");
  check_indices(o.select_cols, "select_cols");
  check_indices(o.exclude_cols, "exclude_cols");
  TF_CHECK_ARG(o.select_cols.empty() || o.select_cols.size() == defaults.size(), kOp,
               "select_cols has {} columns but record_defaults {} entries", o.select_cols.size(),
               defaults.size());
  auto spec = std::make_shared<Spec>();
  int next = 0;
  size_t ex = 0;
  for (size_t i = 0; i < defaults.size(); ++i) {
    const Tensor& d = defaults[i];
    Column c;
    TF_CHECK_ARG(d.defined() && !d.is_symbolic(), kOp,
                 "record_defaults[{}] must be a tensor with a value", i);
    c.dtype = d.dtype();
    TF_CHECK_ARG(c.dtype == float32 || c.dtype == float64 || c.dtype == int32 || c.dtype == int64,
                 kOp,
                 "record_defaults[{}] has dtype {}; CsvDataset reads float32, float64, int32 and "
                 "int64 columns (tapeflow has no string tensors: skip text columns with "
                 "select_cols or exclude_cols)",
                 i, dtype_name(c.dtype));
    TF_CHECK_ARG(d.num_elements() <= 1 && d.rank() <= 1, kOp,
                 "record_defaults[{}] must be a scalar default or an empty vector (a required "
                 "column), got shape {}",
                 i, d.shape().to_string());
    c.required = d.num_elements() == 0;
    if (!c.required) {
      if (c.dtype == int32 || c.dtype == int64)
        c.fallback_int = d.item<int64_t>();
      else
        c.fallback = d.item<double>();  // NaN is a fine default for a float column
    }
    if (!o.select_cols.empty()) {
      c.index = o.select_cols[i];
    } else {
      while (ex < o.exclude_cols.size() && o.exclude_cols[ex] == next) {
        ++next;
        ++ex;
      }
      c.index = next++;
    }
    spec->columns.push_back(c);
  }
  if (o.select_cols.empty()) {
    // Excluded columns past the last read one still count when they exist in the file.
    spec->exact_fields = spec->columns.size() + o.exclude_cols.size();
    if (!o.exclude_cols.empty() && o.exclude_cols.back() >= static_cast<int>(spec->exact_fields))
      TF_THROW(InvalidArgumentError, kOp,
               "exclude_cols index {} is past the {} columns of a record ({} read + {} excluded)",
               o.exclude_cols.back(), spec->exact_fields, spec->columns.size(),
               o.exclude_cols.size());
  } else {
    spec->min_fields = static_cast<size_t>(o.select_cols.back()) + 1;
  }
  spec->files = std::move(files);
  spec->options = std::move(o);
  return spec;
}

}  // namespace

Dataset CsvDataset(std::vector<std::string> filenames, std::vector<Tensor> record_defaults,
                   CsvOptions options) {
  std::shared_ptr<const Spec> spec = make_spec(std::move(filenames), record_defaults, options);
  std::vector<TensorSpec> signature;
  for (const Column& c : spec->columns) signature.emplace_back(TensorShape{}, c.dtype);
  auto make_generator = [spec]() -> Dataset::Generator {
    struct State {
      size_t file = 0;
      std::unique_ptr<Reader> reader;
      std::vector<std::string> fields;
    };
    auto st = std::make_shared<State>();
    return [spec, st]() -> std::optional<Element> {
      for (;;) {
        if (!st->reader) {
          if (st->file == spec->files.size()) return std::nullopt;
          st->reader = std::make_unique<Reader>(spec->files[st->file], spec->options);
          if (spec->options.header) st->reader->record(st->fields);
        }
        Reader& r = *st->reader;
        if (!r.record(st->fields)) {
          st->reader.reset();
          ++st->file;
          continue;
        }
        const size_t n = st->fields.size();
        if (spec->exact_fields > 0)
          TF_CHECK_ARG(n == spec->exact_fields, kOp, "Expect {} fields but have {} in {}",
                       spec->exact_fields, n, r.where());
        else
          TF_CHECK_ARG(n >= spec->min_fields, kOp,
                       "Expect at least {} fields (select_cols reads column {}) but have {} in {}",
                       spec->min_fields, spec->min_fields - 1, n, r.where());
        Element e;
        e.reserve(spec->columns.size());
        for (const Column& c : spec->columns) {
          const auto k = static_cast<size_t>(c.index);
          const std::string& f = st->fields[k];
          // An empty field (quoted or not: every column is numeric) or na_value is missing.
          const bool missing =
              f.empty() || (!spec->options.na_value.empty() && f == spec->options.na_value);
          if (missing) {
            TF_CHECK_ARG(!c.required, kOp, "Field {} is required but missing in {}", k, r.where());
            e.push_back(fallback_of(c));
          } else {
            e.push_back(parse_field(c, f, k, r));
          }
        }
        r.next_record();
        return e;
      }
    };
  };
  return Dataset::from_generator(make_generator, std::move(signature));
}

}  // namespace tapeflow::data::experimental
