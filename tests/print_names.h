// print_names.h — every test file reads this first (the compiler's -include, set on
// ampgrad_test_main in tests/CMakeLists.txt and on the MPI suites): doctest 2.4 prints a
// `const char*` in a message or a check's values as an address; here it prints the text, so a
// message built from dtype_name(…) or an op's name reads "bfloat16", not 0x560f9d8e8621.
// (doctest's own DOCTEST_CONFIG_TREAT_CHAR_STAR_AS_STRING does not compile in 2.4.9, Debian's:
// doctest/doctest#674; and it would also turn `==` of two pointers into a string compare.)
#pragma once
#include <doctest/doctest.h>

template <>
struct doctest::StringMaker<const char*> {
  static doctest::String convert(const char* text) { return text ? text : "(null)"; }
};
template <>
struct doctest::StringMaker<char*> : doctest::StringMaker<const char*> {};
