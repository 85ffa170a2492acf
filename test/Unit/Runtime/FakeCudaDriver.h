//===- FakeCudaDriver.h - Scripting the fake CUDA driver --------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H
#define FA_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H

#include <cstdint>

/// What the fake driver does (set by the test) and what it saw.
struct FakeCudaState {
  // Behaviour.
  int initResult = 0;
  int deviceCount = 1;
  int ccMajor = 8, ccMinor = 0;
  int driverVersion = 12040;
  int optinSharedBytes = 163 * 1024;
  int multiprocessors = 132;
  int ptxLoadResult = 0;
  int cubinLoadResult = 0;
  const char *jitErrorLog = nullptr;
  int missingFunction = 0;
  /// What cuModuleGetGlobal_v2 finds for the cubin's signature global
  /// (NUL-terminated; null: CUDA_ERROR_NOT_FOUND).
  const char *cubinSignature = nullptr;
  int launchResult = 0;
  int allocResult = 0;
  int syncResult = 0;
  int paramsToRecord = 0;
  void *currentContext = nullptr;

  // Record.
  int primaryRetains = 0, primaryReleases = 0;
  int pushes = 0, pops = 0;
  int ptxLoads = 0, cubinLoads = 0, modulesLoaded = 0, modulesUnloaded = 0;
  char functionName[128] = {0};
  char globalName[128] = {0};
  int setAttributeCalls = 0, lastAttribute = -1, lastAttributeValue = -1;
  int launches = 0;
  /// The entries cuModuleGetFunction handed out (in order; a function
  /// handle points at its name here), and per launch (the first 8) the
  /// entry's name, grid and block.
  char functionNames[8][128] = {};
  int functionsFound = 0;
  char launchedNames[8][128] = {};
  unsigned launchedGrids[8][3] = {}, launchedBlocks[8][3] = {};
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, sharedBytes = 0;
  void *stream = nullptr;
  void **extra = nullptr;
  void *launchContext = nullptr;
  int64_t params[128] = {0};
  int allocs = 0, frees = 0, copiesToDevice = 0, copiesToHost = 0;
  int syncs = 0;
  unsigned long long bytesToDevice = 0, bytesToHost = 0;
};

extern "C" {
FakeCudaState *fake_cuda_state();
void fake_cuda_reset();
}

#endif // FA_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H
