// Observability switches: TJ_LOG is a comma-separated list of topics
// ("passes", "fusion", "memory", "compile", "ir": each graph compiled,
// "progress": progress lines even when stderr is not a terminal, or "all"),
// read once.
#pragma once

#include <string_view>

namespace tj {

bool log_enabled(std::string_view topic);
// Turns a topic on from code (e.g. a CLI flag), in addition to TJ_LOG.
void enable_log(std::string_view topic);

}  // namespace tj
