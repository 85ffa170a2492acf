//===- CpuTarget.cpp - fa-compile --target cpu ----------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers a kernel with `fa-lower-to-cpu`, translates it to LLVM IR,
// optimizes it at -O3 for the host (or a named/generic CPU), emits an object
// file, links a shared library with the system C compiler, and writes the C
// header and the metadata.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"

#include "fa/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace mlir;
using namespace mlir::fa::compile;
namespace rt = ::fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

/// Creates the target machine for `cpu` ("host", "generic" or a name).
static Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(StringRef cpu) {
  std::string tripleText = llvm::sys::getProcessTriple();
  llvm::Triple triple(tripleText);
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return llvm::createStringError("cannot target the host " + tripleText +
                                   ": " + error);
  std::string cpuName, features;
  if (cpu == "host") {
    cpuName = llvm::sys::getHostCPUName().str();
    // As -march=native: every feature the host reports, on or off (a VM
    // may lack features its CPU model implies).
    llvm::SmallVector<std::string> flags;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      flags.push_back((feature.second ? "+" : "-") + feature.first().str());
    llvm::sort(flags);
    features = llvm::join(flags, ",");
  } else {
    cpuName = cpu.str();
    std::unique_ptr<llvm::MCSubtargetInfo> sti(
        target->createMCSubtargetInfo(triple, "", ""));
    if (cpu != "generic" && sti && !sti->isCPUStringValid(cpuName))
      return llvm::createStringError("--cpu '" + cpu +
                                     "' is not a CPU LLVM knows for " +
                                     tripleText + " (try host or generic)");
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpuName, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    return llvm::createStringError("cannot create a target machine for " +
                                   tripleText + " and CPU '" + cpuName + "'");
  return std::move(tm);
}

/// The ISA features `tm` may use that the host's feature detection knows
/// about (so the runtime can check them against the CPU it runs on).
static std::vector<std::string>
getCheckableFeatures(const llvm::TargetMachine &tm) {
  llvm::StringMap<bool> known = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> features;
  for (const llvm::SubtargetFeatureKV &kv :
       tm.getMCSubtargetInfo()->getEnabledProcessorFeatures())
    if (known.count(kv.Key))
      features.push_back(kv.Key);
  llvm::sort(features);
  return features;
}

/// Whether `module` computes with bf16 values.
static bool usesBF16(llvm::Module &module) {
  for (llvm::Function &f : module)
    for (llvm::Instruction &inst : llvm::instructions(f)) {
      if (inst.getType()->getScalarType()->isBFloatTy())
        return true;
      for (llvm::Value *operand : inst.operands())
        if (operand->getType()->getScalarType()->isBFloatTy())
          return true;
    }
  return false;
}

// Defining `__truncsfbf2` in the same module keeps the libcall's calling
// convention LLVM's own.
void mlir::fa::compile::addBF16TruncationHelper(llvm::Module &module) {
  if (!usesBF16(module) || module.getFunction("__truncsfbf2"))
    return;
  llvm::LLVMContext &c = module.getContext();
  auto *type = llvm::FunctionType::get(llvm::Type::getBFloatTy(c),
                                       {llvm::Type::getFloatTy(c)}, false);
  llvm::Function *f = llvm::Function::Create(
      type, llvm::GlobalValue::WeakAnyLinkage, "__truncsfbf2", module);
  f->setVisibility(llvm::GlobalValue::HiddenVisibility);
  f->setDoesNotThrow();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  llvm::Value *x = f->getArg(0);
  llvm::Value *bits = b.CreateBitCast(x, b.getInt32Ty());
  llvm::Value *lsb = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value *rounded =
      b.CreateAdd(bits, b.CreateAdd(lsb, b.getInt32(0x7fff)));
  llvm::Value *high = b.CreateTrunc(b.CreateLShr(rounded, 16), b.getInt16Ty());
  llvm::Value *quietNaN = b.CreateOr(
      b.CreateTrunc(b.CreateLShr(bits, 16), b.getInt16Ty()), 0x40);
  llvm::Value *isNaN = b.CreateFCmpUNO(x, x);
  llvm::Value *result = b.CreateSelect(isNaN, quietNaN, high);
  b.CreateRet(b.CreateBitCast(result, llvm::Type::getBFloatTy(c)));
  llvm::appendToCompilerUsed(module, {f});
}

/// Defines `const char fa_signature_<symbol>[]` = getKernelSignature(md)
/// in `module`, with external linkage and default visibility.
static void addSignatureGlobal(llvm::Module &module,
                               const rt::KernelMetadata &md) {
  llvm::Constant *text = llvm::ConstantDataArray::getString(
      module.getContext(), rt::getKernelSignature(md), /*AddNull=*/true);
  auto *global = new llvm::GlobalVariable(
      module, text->getType(), /*isConstant=*/true,
      llvm::GlobalValue::ExternalLinkage, text, rt::getSignatureSymbol(md));
  global->setAlignment(llvm::Align(1));
  llvm::appendToCompilerUsed(module, {global});
}

/// Links `object` into the shared library `library` with `cc`. Returns the
/// compiler's output on failure.
static Error linkSharedLibrary(StringRef cc, StringRef object,
                               StringRef library, StringRef logPath) {
  // -z defs: an unresolved symbol is a link error here, not a dlopen error
  // on the user's machine.
  llvm::SmallVector<StringRef> args = {cc,     "-shared",         "-o",
                                       library, object,           "-lm",
                                       "-Wl,-z,defs"};
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(logPath),
                                          StringRef(logPath)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(cc, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/300,
                                     /*MemoryLimit=*/0, &message);
  if (rc == 0)
    return Error::success();
  std::string output;
  if (auto buffer = llvm::MemoryBuffer::getFile(logPath))
    output = (*buffer)->getBuffer().trim().str();
  return llvm::createStringError(
      formatv("linking '{0}' with '{1} -shared' failed{2}{3}{4}", library, cc,
              message.empty() ? "" : ": ", message,
              output.empty() ? "" : ":\n" + output));
}

/// The C type of an element.
static StringRef getCType(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32:
    return "float";
  case rt::DType::F16:
  case rt::DType::BF16:
    return "uint16_t";
  case rt::DType::I32:
    return "int32_t";
  case rt::DType::I8:
    return "int8_t";
  }
  return "void";
}

/// Writes `<name>.h`: the descriptor types and the C entry point.
static void writeCpuHeader(const rt::KernelMetadata &md,
                           llvm::raw_ostream &os) {
  std::string guard = "FA_KERNEL_" + StringRef(md.name).upper() + "_H";
  os << "/*===- " << md.name << ".h - fa kernel (C interface) -===*/\n"
     << "/*\n"
     << " * Generated by fa-compile; do not edit. Target: cpu "
     << md.target.triple;
  if (!md.target.cpu.empty())
    os << " (" << md.target.cpu << ")";
  os << ".\n"
     << " * Files: " << md.files.library
     << (md.files.library.empty() ? "" : ", ") << md.files.object
     << "; metadata " << md.name << ".json (" << md.format << ").\n"
     << " *\n";
  printKernelSummary(md, os, " * ");
  os << " *\n"
     << " * Each parameter is a pointer to a memref descriptor of a contiguous\n"
     << " * row-major buffer: allocated = aligned = the data, offset = 0,\n"
     << " * sizes = the shape, strides[rank-1] = 1 and\n"
     << " * strides[i] = strides[i+1] * sizes[i+1]. f16 and bf16 elements are\n"
     << " * 16-bit patterns. Outputs must not overlap inputs. The FARuntime\n"
     << " * library (fa/Runtime/FARuntime.h) builds the descriptors and checks\n"
     << " * the shapes for you.\n"
     << " */\n\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stdint.h>\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  for (const rt::ParamInfo &param : md.params) {
    std::string type = md.name + "_" + param.name + "_desc";
    StringRef ctype = getCType(param.dtype);
    os << "/* " << param.name << ": " << rt::getDTypeName(param.dtype)
       << ", rank " << param.getRank() << " (" << rt::getRoleName(param.role)
       << ") */\n"
       << "typedef struct " << type << " {\n"
       << "  " << ctype << " *allocated;\n"
       << "  " << ctype << " *aligned;\n"
       << "  int64_t offset;\n"
       << "  int64_t sizes[" << param.getRank() << "];\n"
       << "  int64_t strides[" << param.getRank() << "];\n"
       << "} " << type << ";\n\n";
  }
  os << "void _mlir_ciface_" << md.symbol << "(";
  for (auto [i, param] : llvm::enumerate(md.params))
    os << (i ? ", " : "") << md.name << "_" << param.name << "_desc *"
       << param.name;
  os << ");\n\n"
     << "#ifdef __cplusplus\n}\n#endif\n\n"
     << "#endif /* " << guard << " */\n";
}

Error mlir::fa::compile::emitCpuArtifacts(KernelJob &job,
                                          const CompileOptions &options,
                                          ArtifactStage &stage) {
  rt::KernelMetadata &md = job.metadata;
  ModuleOp module = *job.module;

  Expected<std::unique_ptr<llvm::TargetMachine>> tm =
      createTargetMachine(options.cpu);
  if (!tm)
    return tm.takeError();

  // fa ops -> LLVM dialect. The vector kernels use the target's widest
  // f32 vectors: 16 lanes with AVX-512, else 8 (AVX2, or two SSE halves).
  PassManager pm(module.getContext());
  LowerToCPUOptions lowering;
  lowering.blockQ = options.blockQ;
  lowering.blockKV = options.blockKV;
  lowering.softmaxTile = options.softmaxTile;
  const llvm::MCSubtargetInfo *sti = (*tm)->getMCSubtargetInfo();
  bool avx512 = sti && sti->getTargetTriple().isX86() &&
                sti->checkFeatures("+avx512f");
  lowering.vectorWidth = avx512 ? 16 : 8;
  lowering.cpuBlockQ = avx512 ? 64 : 32;
  // bf16 inputs through vdpbf16ps where the target has it.
  lowering.cpuBf16Dot = avx512 && sti->checkFeatures("+avx512bf16") &&
                        options.cpuBf16 != "f32";
  lowering.cpuL2CacheSize = getHostL2CacheSize();
  lowering.cpuL1CacheSize = getHostL1CacheSize();
  buildLowerToCPUPipeline(pm, lowering);
  if (failed(pm.run(module)))
    return llvm::createStringError("lowering kernel '" + md.name +
                                   "' with fa-lower-to-cpu failed");

  // LLVM dialect -> optimized LLVM IR -> object.
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, md.name);
  if (!llvmModule)
    return llvm::createStringError("translating kernel '" + md.name +
                                   "' to LLVM IR failed");
  llvmModule->setDataLayout((*tm)->createDataLayout());
  llvmModule->setTargetTriple((*tm)->getTargetTriple());
  auto optimize = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                            tm->get());
  if (Error err = optimize(llvmModule.get()))
    return llvm::createStringError(
        "optimizing kernel '" + md.name +
        "' failed: " + llvm::toString(std::move(err)));

  addBF16TruncationHelper(*llvmModule);

  // The signature, which the runtime compares with the metadata at load:
  // `const char fa_signature_<symbol>[]`, exported from the library.
  md.target.kind = rt::TargetKind::Cpu;
  md.launch.reset();
  addSignatureGlobal(*llvmModule, md);

  std::string objectName = md.name + ".o";
  std::string objectPath = stage.getPath(objectName);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objectPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return llvm::createStringError("cannot write '" + objectPath +
                                     "': " + ec.message());
    llvm::legacy::PassManager codegen;
    if ((*tm)->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
      return llvm::createStringError("the target cannot emit object files");
    codegen.run(*llvmModule);
    os.close();
    if (os.has_error()) {
      std::error_code writeError = os.error();
      os.clear_error();
      return llvm::createStringError("cannot write '" + objectPath +
                                     "': " + writeError.message());
    }
  }
  stage.addFile(objectName);

  // Object -> shared library, with the system C compiler.
  std::string libraryName = md.name + ".so";
  std::string cc;
  if (!options.cc.empty()) {
    llvm::ErrorOr<std::string> found =
        llvm::sys::findProgramByName(options.cc);
    if (!found)
      return llvm::createStringError("--cc '" + options.cc +
                                     "': no such program");
    cc = *found;
  } else if (llvm::ErrorOr<std::string> found =
                 llvm::sys::findProgramByName("cc")) {
    cc = *found;
  }
  if (cc.empty()) {
    llvm::errs() << "fa-compile: warning: no C compiler ('cc') found: wrote "
                    "only "
                 << objectName << "; link it with `cc -shared -o "
                 << libraryName << " " << objectName << " -lm`\n";
  } else {
    std::string log = stage.getPath(md.name + ".link.log");
    if (Error err = linkSharedLibrary(cc, objectPath,
                                      stage.getPath(libraryName), log))
      return err;
    stage.addFile(libraryName);
    md.files.library = libraryName;
  }

  md.target.kind = rt::TargetKind::Cpu;
  md.target.triple = (*tm)->getTargetTriple().str();
  md.target.cpu = (*tm)->getTargetCPU().str();
  md.target.features = getCheckableFeatures(**tm);
  md.files.object = objectName;
  md.files.header = md.name + ".h";
  md.launch.reset();

  if (Error err = stage.writeFile(md.files.header, [&](llvm::raw_ostream &os) {
        writeCpuHeader(md, os);
      }))
    return err;
  return writeMetadataFile(md, stage, options);
}
