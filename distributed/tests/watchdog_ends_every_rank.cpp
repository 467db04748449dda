// watchdog_ends_every_rank.cpp — a transport failure that one rank's watchdog sees ends every rank
// (issue 42 §3), also ranks blocked in a wait that no error reaches: rank 1's probe reports a
// failure after 0.2 s while both ranks wait in an MPI_Recv that nothing will ever match. Not a
// doctest suite: its run ends in MPI_Abort. ctest expects the watchdog's message, and no timeout.
#include <chrono>
#include <string>

#include "distributed/environment.h"
#include "distributed/watchdog.h"

int main(int argc, char** argv) {
  using namespace std::chrono;
  ampgrad::distributed::Environment env(argc, argv);
  const auto start = steady_clock::now();
  const bool fails = ampgrad::distributed::rank() == 1;
  ampgrad::distributed::Watchdog watch([&] {
    return fails && steady_clock::now() - start > milliseconds(200) ? std::string("the test's transport failed on cue") : std::string();
  });
  int never = 0;
  MPI_Recv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return 0;  // not reached: nothing sends
}
