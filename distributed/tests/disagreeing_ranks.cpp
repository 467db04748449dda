// disagreeing_ranks.cpp — the trainers under mpirun with ranks that disagree (issue 29 §3): a
// different --batch-size hung, --model mlp against cnn was a SIGSEGV in MPI_Bcast, cnn against
// cnn-bn corrupted the heap, and a different --seed, --lr or --amp drifted silently. Each must
// now end every rank with exit status != 0 and a message naming the setting and both values, as
// typed (issue 42 §5).
// One process (not mpirun -np 2 itself): each case starts its own mpirun under `timeout`.
#include <doctest/doctest.h>

#include "trainer_fixtures.h"

// rank 0 runs `command` + `a`, rank 1 `command` + `b`
static void check_refused(const std::string& command, const std::string& a, const std::string& b, const std::string& message) {
  const std::string mpirun = "timeout 120 " MPIRUN " -np 1 ";
  const CommandResult r = run_command(mpirun + command + " " + a + " : -np 1 " + command + " " + b);
  CAPTURE(a);
  CAPTURE(b);
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // not the timeout: no rank hung
  CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
}

TEST_CASE("mnist --ddp: ranks with different settings all fail, naming the first setting that differs and both values") {
  TempDir dir;
  write_synthetic_mnist(dir);
  const std::string mnist = MNIST_COMMAND " --ddp --epochs 1 --threads 1 --data " + dir.path.string();
  const std::string differ = "mnist: the run's settings differ between ranks: ";
  check_refused(mnist, "--batch-size 64", "--batch-size 32", differ + "rank 0 has '--batch-size 64', rank 1 has '--batch-size 32'");
  check_refused(mnist, "--model mlp", "--model cnn", differ + "rank 0 has '--model mlp', rank 1 has '--model cnn'");
  check_refused(mnist, "--model cnn", "--model cnn-bn", differ + "rank 0 has '--model cnn', rank 1 has '--model cnn-bn'");
  check_refused(mnist, "--seed 1", "--seed 2", differ + "rank 0 has '--seed 1', rank 1 has '--seed 2'");
  // as typed: 0.05 is not 0.050000000000000003 (a float's 17 digits)
  check_refused(mnist, "--lr 0.05", "--lr 0.5", differ + "rank 0 has '--lr 0.05', rank 1 has '--lr 0.5'");
  check_refused(mnist, "--amp off", "--amp fp16", differ + "rank 0 has '--amp off', rank 1 has '--amp fp16'");
}

TEST_CASE("gpt --ddp: ranks with different settings all fail, naming the first setting that differs and both values") {
  TempDir dir;
  const std::string gpt = GPT_COMMAND " --ddp --steps 2 --layers 1 --embd 16 --heads 1 --block-size 8 --batch-size 2 --sample 0 --threads 1 --text " +
                          write_periodic_text(dir);
  check_refused(gpt, "--seed 1", "--seed 2", "gpt: the run's settings differ between ranks: rank 0 has 'seed 1', rank 1 has 'seed 2'");
  check_refused(gpt, "--embd 16", "--embd 32", "gpt: the run's settings differ between ranks: rank 0 has 'embd 16', rank 1 has 'embd 32'");
  check_refused(gpt, "--lr 0.003", "--lr 0.001", "gpt: the run's settings differ between ranks: rank 0 has 'lr 0.003', rank 1 has 'lr 0.001'");
}
