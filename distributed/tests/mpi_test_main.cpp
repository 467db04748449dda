// mpi_test_main.cpp — doctest's main for the suites mpirun starts: MPI up before the first case,
// down after the last. Every rank runs every case, so the collectives inside them meet; a case
// that cannot run where MPI gives it one rank prints SKIPPED (ctest shows it as skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "distributed/environment.h"

int main(int argc, char** argv) {
  ampgrad::distributed::Environment env(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}
