# -*- Python -*-
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
#
# Runs the GoogleTest unit tests as part of check-fa.

import os

import lit.formats

config.name = "FA-Unit"
config.suffixes = []
config.test_exec_root = os.path.join(config.fa_obj_root, "test", "Unit")
config.test_source_root = config.test_exec_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
