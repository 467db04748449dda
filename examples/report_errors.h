// report_errors.h — the examples' main bodies run through this: an error (a missing data file,
// flags that do not fit together, no GPU) is printed as "program: message" with exit status 1,
// instead of ending the process in std::terminate.
#pragma once
#include <exception>
#include <iostream>

template <class Body> int report_errors(const char* program, Body body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return 1;
  }
}
