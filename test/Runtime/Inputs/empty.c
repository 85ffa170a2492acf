int fa_not_a_kernel(void) { return 0; }
