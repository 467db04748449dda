// report_errors.h — the examples' main bodies run through this: an error (a missing data file,
// flags that do not fit together, no GPU) is printed as "program: message" with exit status 1,
// instead of ending the process in std::terminate.
#pragma once
#include <exception>
#include <iostream>
#include <string>

// "program: message" in one write: under mpirun the ranks share one stderr, and a line written in
// pieces can come out interleaved with another rank's.
inline void print_error(const char* program, const std::exception& e) { std::cerr << std::string(program) + ": " + e.what() + "\n"; }

template <class Body> int report_errors(const char* program, Body body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    print_error(program, e);
    return 1;
  }
}
