#include "perf/train/train_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "perf/train/fashion_mnist.h"

namespace terse {
namespace train {
namespace {

bool parse_whole(const std::string& flag, const char* text, long lo, long hi, long* value,
                 std::string* error) {
  errno = 0;
  char* end = nullptr;
  const long parsed = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || parsed < lo || parsed > hi) {
    *error = flag + ": '" + text + "' is not a whole number from " + std::to_string(lo) + " to " +
             std::to_string(hi);
    return false;
  }
  *value = parsed;
  return true;
}

bool parse_real(const std::string& flag, const char* text, double lo, double hi, float* value,
                std::string* error) {
  errno = 0;
  char* end = nullptr;
  const double parsed = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(parsed) || parsed < lo ||
      parsed > hi) {
    *error = flag + ": '" + text + "' is not a number from " + std::to_string(lo) + " to " +
             std::to_string(hi);
    return false;
  }
  *value = static_cast<float>(parsed);
  return true;
}

}  // namespace

ParseOutcome parse_train_options(int argc, char** argv, TrainOptions* options, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") return ParseOutcome::kHelp;
    if (i + 1 >= argc) {
      *error =
          flag.rfind("--", 0) == 0 ? flag + " needs a value" : "unknown argument '" + flag + "'";
      return ParseOutcome::kError;
    }
    const char* value = argv[++i];
    long whole = 0;
    bool ok = true;
    if (flag == "--epochs") {
      ok = parse_whole(flag, value, 1, 100000, &whole, error);
      options->epochs = static_cast<int>(whole);
    } else if (flag == "--ranks") {
      ok = parse_whole(flag, value, 1, 1024, &whole, error);
      options->ranks = static_cast<int>(whole);
    } else if (flag == "--model") {
      options->model = value;
      if (options->model != "mlp" && options->model != "cnn") {
        *error = flag + ": '" + value + "' is not a model (mlp or cnn)";
        ok = false;
      }
    } else if (flag == "--json") {
      options->json_path = value;
    } else if (flag == "--batch") {
      ok = parse_whole(flag, value, 1, 60000, &whole, error);
      options->batch = static_cast<int>(whole);
    } else if (flag == "--lr") {
      ok = parse_real(flag, value, 0.0, 10.0, &options->learning_rate, error);
    } else if (flag == "--momentum") {
      ok = parse_real(flag, value, 0.0, 0.999, &options->momentum, error);
    } else if (flag == "--seed") {
      ok = parse_whole(flag, value, 0, 2147483647L, &whole, error);
      options->seed = static_cast<uint64_t>(whole);
    } else if (flag == "--steps") {
      ok = parse_whole(flag, value, 1, 1000000, &whole, error);
      options->max_steps = static_cast<int>(whole);
    } else if (flag == "--data") {
      options->data_dir = value;
    } else if (flag == "--sync") {
      ok = parse_sync_scheme(value, &options->sync, error);
    } else {
      *error = "unknown argument '" + flag + "'";
      ok = false;
    }
    if (!ok) return ParseOutcome::kError;
  }
  if (options->data_dir.empty()) options->data_dir = kFashionMnistDir;
  return ParseOutcome::kRun;
}

std::string train_usage(const std::string& program) {
  return "usage: " + program +
         " [--epochs E] [--ranks N] [--model mlp|cnn] [--json FILE] [options]\n"
         "Data-parallel training on Fashion-MNIST over terse; the gradients of every layer go\n"
         "through terseAllReduceTensor under TERSE_CODEC / TERSE_POLICY, or the ranks share\n"
         "the model through parameter-server tensors, one per layer (--sync).\n"
         "  --epochs E      passes over the training set (10)\n"
         "  --ranks N       ranks of the job: threads in this process, or N / processes threads\n"
         "                  in each process under perf/launch.sh, mpirun or torchrun (default:\n"
         "                  one per process)\n"
         "  --model M       mlp (784-256-128-10) or cnn (two 3x3 convolutions, two linear) (mlp)\n"
         "  --json FILE     per-epoch loss, accuracy, bytes sent, wire ratio and time\n"
         "  --batch B       samples per rank and step (32)\n"
         "  --lr X          learning rate (0.05)\n"
         "  --momentum X    SGD momentum (0.9; tensors sent through dgc get its momentum instead)\n"
         "  --seed S        initial weights and shuffling, the same on every rank (1)\n"
         "  --steps S       at most S steps per epoch (default: the whole training set)\n"
         "  --sync S        how the ranks keep their models together (allreduce):\n"
         "                  allreduce                   average the gradients every step\n"
         "                  downpour[:send=N,fetch=M]   push the optimizer's updates every N\n"
         "                                              steps, fetch the centre every M (1,1)\n"
         "                  easgd[:tau=T,beta=B]        elastic averaging every T steps, moving\n"
         "                                              rate B / ranks (4, 0.9)\n"
         "                  ssp:S                       push every step, run at most S steps\n"
         "                                              ahead of the slowest rank (0: in step)\n"
         "                  Pushes carry 1/ranks of each update and go through the codec the\n"
         "                  policy gives the layer; downpour and easgd ranks never wait, and a\n"
         "                  faster rank takes more of an epoch's batches; test_acc is the\n"
         "                  centre's (the parameter-server tensors after every rank's epoch)\n"
         "  --data DIR      the IDX files (" +
         std::string(kFashionMnistDir) + ", Debian package " + kFashionMnistPackage +
         ")\n"
         "Prints one line per epoch: epoch E train_loss L test_acc A wire_ratio R\n"
         "R: the bytes the ranks sent in the epoch over the same traffic without codecs;\n"
         "with allreduce, the gradient allreduces (headers included) over uncompressed ring\n"
         "allreduces; with a parameter server, the values of every push and of every fetch's\n"
         "answers (protocol headers left out) over the same as the tensors' own elements, so\n"
         "1 when nothing is compressed\n";
}

}  // namespace train
}  // namespace terse
