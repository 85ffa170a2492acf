// A C++ client of the static libFARuntime.a from the standalone build: the
// metadata API and the RAII wrapper, no LLVM anywhere.
#include "fa/Runtime/FARuntime.hpp"
#include "fa/Runtime/KernelMetadata.h"

#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  std::optional<fa::runtime::KernelMetadata> md =
      fa::runtime::parseKernelMetadata(text.str(), error);
  if (!md) {
    std::cout << "parse error: " << error << "\n";
    return 1;
  }
  std::cout << "metadata: " << md->name << " " << fa::runtime::getOpName(md->op)
            << " " << fa::runtime::getDTypeName(md->dtype) << ", "
            << md->params.size() << " params\n";
  std::string junk = text.str() + "}";
  if (!fa::runtime::parseKernelMetadata(junk, error))
    std::cout << "junk: " << error << "\n";

  fa::runtime::Kernel kernel;
  fa::runtime::Status status =
      fa::runtime::Kernel::load(argv[1], FA_DEVICE_CPU, kernel);
  if (!status) {
    std::cout << status.toString() << "\n";
    return 1;
  }
  float x[3] = {1, 1, 1}, y[3] = {0, 0, 0};
  fa_tensor tx = fa::runtime::makeTensor(x, FA_DTYPE_F32, {1, 3});
  fa_tensor ty = fa::runtime::makeTensor(y, FA_DTYPE_F32, {1, 3});
  status = kernel.softmax(tx, ty);
  std::cout << "softmax: " << status.toString() << " " << y[0] << " " << y[1]
            << " " << y[2] << "\n";
  return 0;
}
