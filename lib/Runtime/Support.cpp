//===- Support.cpp - String, file and path helpers of FARuntime -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace fa::runtime;

std::string_view fa::runtime::trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back()))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> fa::runtime::split(std::string_view s,
                                                 char separator) {
  std::vector<std::string_view> pieces;
  while (true) {
    size_t at = s.find(separator);
    pieces.push_back(s.substr(0, at));
    if (at == std::string_view::npos)
      return pieces;
    s.remove_prefix(at + 1);
  }
}

std::string fa::runtime::join(const std::vector<std::string> &pieces,
                              std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i)
      out += separator;
    out += pieces[i];
  }
  return out;
}

bool fa::runtime::parseUnsigned(std::string_view s, uint64_t &value) {
  if (s.empty())
    return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!isDigit(c))
      return false;
    if (__builtin_mul_overflow(v, uint64_t(10), &v) ||
        __builtin_add_overflow(v, uint64_t(c - '0'), &v))
      return false;
  }
  value = v;
  return true;
}

std::string fa::runtime::formatPointer(const void *p) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%p", p);
  return buffer;
}

Result<std::string> fa::runtime::readArtifactFile(const std::string &path,
                                                  std::string_view what) {
  auto failure = [&](int error) {
    return makeFailure(FA_ERROR_IO, cat("cannot read the ", what, " '", path,
                                        "': ", std::strerror(error)));
  };
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return failure(errno);
  if (S_ISDIR(info.st_mode))
    return failure(EISDIR);
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return failure(errno);
  std::string data;
  char buffer[1 << 16];
  while (true) {
    size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    data.append(buffer, n);
    if (n < sizeof(buffer))
      break;
  }
  int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error)
    return failure(error);
  return data;
}

bool fa::runtime::pathExists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

std::string fa::runtime::getAbsoluteDirectory(const std::string &path) {
  std::string absolute = path;
  if (absolute.empty() || absolute.front() != '/') {
    std::string cwd(4096, '\0');
    while (!::getcwd(cwd.data(), cwd.size())) {
      if (errno != ERANGE) {
        cwd = ".";
        break;
      }
      cwd.resize(cwd.size() * 2);
    }
    cwd.resize(std::strlen(cwd.c_str()));
    absolute = cwd + "/" + absolute;
  }
  size_t slash = absolute.find_last_of('/');
  if (slash == 0)
    return "/";
  return absolute.substr(0, slash);
}

std::string fa::runtime::joinPath(const std::string &dir,
                                  const std::string &name) {
  if (!name.empty() && name.front() == '/')
    return name;
  if (dir.empty())
    return name;
  if (dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}
