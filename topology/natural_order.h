// Names ordered as people number them: mlx5_2 before mlx5_10, eth1 before eth10.
#pragma once

#include <string>

namespace terse {

bool natural_less(const std::string& a, const std::string& b);

}  // namespace terse
