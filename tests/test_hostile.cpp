// test_hostile.cpp — the programs run as a careless user or an attacker would (issue 29 §3): outputs
// onto FIFOs, devices and directories, one file in two roles, a full disk, inputs of the wrong
// type or size, doctored saved states, models too large for the machine. Each case runs the built
// command under `timeout`, so a hang fails instead of stalling CI, and asserts the exit status
// and the message. The ranks that disagree are in distributed/tests/disagreeing_ranks.cpp.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "data/safetensors.h"
#include "skip.h"
#include "trainer_fixtures.h"

using namespace ampgrad;

// `command` must fail (exit status 1, within the timeout) printing `message`.
static void check_refused(const std::string& command, const std::string& message) {
  CAPTURE(command);
  const CommandResult r = run_command("timeout 60 " + command);
  CHECK(r.status == 1);
  CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
}

// A synthetic MNIST set, one epoch of it, and the text of a tiny GPT run of 2 steps.
struct Programs {
  TempDir dir;
  std::string mnist, gpt;
  Programs() {
    write_synthetic_mnist(dir);
    mnist = std::string(MNIST_COMMAND) + " --data " + dir.path.string() + " --epochs 1 --batch-size 64 --threads 1";
    gpt = std::string(GPT_COMMAND) + " --text " + write_periodic_text(dir) +
          " --steps 2 --eval-every 1 --eval-batches 1 --layers 1 --embd 16 --heads 1 --block-size 8 --batch-size 2 --sample 0 --threads 1";
  }
  // A saved state of `command` (mnist or gpt) with `change` applied to its tensors and metadata.
  template <class Change> std::string checkpoint(const std::string& command, const std::string& flags, Change change) {
    const std::string path = dir / "doctored.safetensors";
    REQUIRE(run_command(command + " " + flags + " --save " + path).status == 0);
    data::SafeTensors ck = data::load_safetensors(path);
    change(ck);
    data::save_safetensors(path, ck.tensors, ck.metadata);
    return path;
  }
};

TEST_CASE("outputs: a FIFO, a device or a directory is refused, before any training") {
  Programs p;
  const std::string fifo = p.dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check_refused(p.mnist + " --metrics " + fifo, "--metrics " + fifo + ": is a FIFO, not a regular file");
  check_refused(p.gpt + " --metrics " + fifo, "--metrics " + fifo + ": is a FIFO, not a regular file");
  check_refused(p.mnist + " --save /dev/null", "--save /dev/null: is a device or other special file, not a regular file");
  check_refused(p.mnist + " --scale-history " + p.dir.path.string(), "--scale-history " + p.dir.path.string() + ": is a directory");
  check_refused(p.gpt + " --profile-trace /dev/zero", "--profile-trace /dev/zero: is a device");
  check_refused(std::filesystem::path(MNIST_COMMAND).parent_path().string() + "/memory --steps 1 --timeline /dev/null", "--timeline /dev/null: is a device");
}

TEST_CASE("outputs: one file in two roles is refused, whatever the spelling, and the saved state stays intact") {
  Programs p;
  const std::string ck = p.dir / "ck.safetensors";
  check_refused(p.mnist + " --save " + ck + " --scale-history " + p.dir.path.string() + "/./ck.safetensors",
                "--scale-history " + p.dir.path.string() + "/./ck.safetensors is the file --save " + ck + " names: one file cannot serve two roles");
  REQUIRE(run_command(p.gpt + " --save " + ck).status == 0);
  const std::vector<uint8_t> saved = file_bytes(ck);
  std::filesystem::create_symlink(ck, p.dir / "link");
  check_refused(p.gpt + " --steps 3 --resume " + ck + " --metrics " + (p.dir / "link"),
                "--metrics " + (p.dir / "link") + " is the file --resume " + ck + " names");
  CHECK(file_bytes(ck) == saved);
  // --save may go on writing the saved state it resumed from: it is read before it is replaced
  CHECK(run_command("timeout 60 " + p.gpt + " --steps 3 --resume " + ck + " --save " + ck).status == 0);
}

TEST_CASE("outputs: a write that fails (here a file size limit of 0, as a full disk) fails the run naming the file, leaving nothing") {
  Programs p;
  const std::string metrics = p.dir / "metrics.csv";
  const int64_t before = p.dir.entries();
  // SIGXFSZ ignored: the write returns EFBIG, as it returns ENOSPC on a full disk. The sanitizer
  // build's clang links LLVM's OpenMP, which registers itself in a file in /dev/shm: the limit stops it
  // at start and leaves that file empty, and a later process given the same pid would die reading it.
  const CommandResult r = run_command("timeout 60 bash -c \"trap '' XFSZ; (ulimit -f 0; exec " + p.mnist + " --metrics " + metrics +
                                      ") & wait \\$!; rc=\\$?; rm -f /dev/shm/__KMP_REGISTERED_LIB_\\$!_\\$(id -u); exit \\$rc\"");
  SKIP_TEST_IF(r.output.find("OMP: Error #179") != std::string::npos, "LLVM's OpenMP runtime cannot start under a file size limit of 0");
  CHECK(r.status == 1);
  CHECK_MESSAGE(r.output.find(metrics + ": writing " + metrics + ".tmp.") != std::string::npos, r.output);
  CHECK(p.dir.entries() == before);  // no metrics.csv, no temporary
}

TEST_CASE("inputs: a FIFO as --text fails at once, and images of another size and labels outside 0-9 fail at load, naming the file") {
  Programs p;
  const std::string fifo = p.dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check_refused(std::string(GPT_COMMAND) + " --text " + fifo, fifo + ": cannot read it as a file: it is a FIFO");

  TempDir odd;
  for (auto [split, n] : {std::pair<std::string, int64_t>{"train", 8}, {"t10k", 4}}) {
    data::write_idx_images(odd / (split + "-images-idx3-ubyte"), {n, 28, 29, std::vector<uint8_t>(n * 28 * 29)});
    data::write_idx_labels(odd / (split + "-labels-idx1-ubyte"), std::vector<uint8_t>(n, split == "t10k" ? 200 : 3));
  }
  for (const char* model : {"mlp", "cnn"})
    check_refused(std::string(MNIST_COMMAND) + " --model " + model + " --data " + odd.path.string(),
                  odd / "train-images-idx3-ubyte" + ": images of 28x29 pixels (byte offsets 8-15); the model takes 28x28");
  data::write_idx_images(odd / "train-images-idx3-ubyte", {8, 28, 28, std::vector<uint8_t>(8 * 784)});
  data::write_idx_images(odd / "t10k-images-idx3-ubyte", {4, 28, 28, std::vector<uint8_t>(4 * 784)});
  check_refused(std::string(MNIST_COMMAND) + " --data " + odd.path.string(), odd / "t10k-labels-idx1-ubyte" + ": label 0 (byte offset 8) is 200, not a class 0-9");
}

TEST_CASE("saved states: dtypes, strays, non-finite values, out-of-bounds options and a zero scale are refused, naming file and key") {
  Programs p;
  auto retype = [](DType dtype) {
    return [dtype](data::SafeTensors& ck) { ck.tensors[0].second = ck.tensors[0].second.to(dtype); };  // model.1.weight
  };
  for (DType dtype : {kFloat64, kFloat16, kInt64, kBool}) {
    const std::string ck = p.checkpoint(p.mnist, "", retype(dtype));
    check_refused(p.mnist + " --epochs 2 --resume " + ck, ck + ": tensor 'model.1.weight' is " + dtype_name(dtype) + ", the model's is float32");
  }
  std::string ck = p.checkpoint(p.mnist, "", [](data::SafeTensors& c) { c.tensors.emplace_back("stray", ones({1})); });
  check_refused(p.mnist + " --epochs 2 --resume " + ck, ck + ": tensor 'stray' is under no key a training state holds");
  ck = p.checkpoint(p.mnist, "", [](data::SafeTensors& c) { c.tensors[2].second.view({-1}).narrow(0, 5, 1).fill_(NAN); });
  check_refused(p.mnist + " --epochs 2 --resume " + ck, ck + ": tensor 'model.3.weight' holds nan at element 5");
  struct Bound {
    std::string key, value, message;
  };
  for (const Bound& b : {Bound{"optimizer.param_groups.0.momentum", "2", "is 2, outside [0, 1]"},
                         Bound{"optimizer.momentum", "2", "is 2, outside [0, 1]"},  // a one-group file's key
                         Bound{"optimizer.param_groups.0.dampening", "nan", "is nan, not a finite number"}}) {  // no structured binding: clang 14's lambdas cannot capture one
    ck = p.checkpoint(p.mnist, "", [&](data::SafeTensors& c) { c.metadata[b.key] = b.value; });
    check_refused(p.mnist + " --epochs 2 --resume " + ck, ck + ": metadata '" + b.key + "' " + b.message);
  }
  ck = p.checkpoint(p.mnist, "--amp fp16", [](data::SafeTensors& c) { c.metadata["scaler.scale"] = "1e-300"; });
  check_refused(p.mnist + " --amp fp16 --epochs 2 --resume " + ck, ck + ": metadata 'scaler.scale' is 1e-300, which is 0 in float32");
  ck = p.checkpoint(p.gpt, "", [](data::SafeTensors& c) { c.metadata["rng.batches"] = "garbage"; });
  check_refused(p.gpt + " --steps 3 --resume " + ck, ck + ": metadata 'rng.batches': Generator state");
}

TEST_CASE("saved states: resuming under another --amp says what becomes of the scaler's state, in both trainers") {
  Programs p;
  for (const std::string& trainer : {p.mnist, p.gpt}) {
    CAPTURE(trainer);
    const std::string more = trainer == p.mnist ? " --epochs 2" : " --steps 3";
    const std::string with_scaler = p.checkpoint(trainer, "--amp fp16", [](data::SafeTensors&) {});
    CommandResult r = run_command("timeout 60 " + trainer + more + " --amp bf16 --resume " + with_scaler);
    CHECK(r.status == 0);
    CHECK_MESSAGE(r.output.find("holds a GradScaler state (scale 65536), which this run, without a scaler, leaves unused") != std::string::npos, r.output);
    const std::string without = p.checkpoint(trainer, "", [](data::SafeTensors&) {});
    r = run_command("timeout 60 " + trainer + more + " --amp fp16 --resume " + without);
    CHECK(r.status == 0);
    CHECK_MESSAGE(r.output.find("holds no GradScaler state (it was saved without one): this run's scaler starts afresh at scale 65536") != std::string::npos,
                  r.output);
  }
}

TEST_CASE("memory: a GPT that cannot fit is refused before it is built, naming what it needs") {
  Programs p;
  check_refused(p.gpt + " --embd 1048576", "(--layers 1 --embd 1048576) has 1.32e+13 parameters, which need at least");
  check_refused(p.gpt + " --layers 1024 --embd 4096 --heads 8", "more than this machine's");
}
