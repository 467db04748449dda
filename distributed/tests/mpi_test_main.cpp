// mpi_test_main.cpp — doctest's main for the suites mpirun starts: MPI up before the first case,
// down after the last. Every rank runs every case, so the collectives inside them meet; a case
// that cannot run here skips itself (tests/skip.h). The ranks agree on one exit status before
// they end, as mpirun passes on the first non-zero one it sees: a failure on any rank fails
// every rank, and the run is skipped only where every rank skipped every case.
#define DOCTEST_CONFIG_IMPLEMENT
#include "distributed/environment.h"
#include "doctest_main.h"

int main(int argc, char** argv) {
  ampgrad::distributed::Environment env(argc, argv);
  const int rc = ampgrad_test::run_cases(argc, argv);
  int worst[2] = {rc != 0 && rc != ampgrad_test::kSkipped, rc != ampgrad_test::kSkipped};  // failed, ran
  AMPGRAD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, worst, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return worst[0] ? 1 : worst[1] ? 0 : ampgrad_test::kSkipped;
}
