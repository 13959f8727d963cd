// The extension's one translation unit: every file of csrc/ parses PyTorch's headers, about 9 s
// each on a 2-core machine, so the build compiles them together (setup.py) instead of one by one.
#include "module.cpp"
#include "process_group_terse.cpp"
#include "terse_work.cpp"
