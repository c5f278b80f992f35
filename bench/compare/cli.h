// Command-line helpers shared by bench/compare's native sides (compare_torch, compare_cuda).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace compare {

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace compare
